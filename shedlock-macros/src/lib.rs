//! Attribute macros for shedlock (placeholder, see issue 4).

use proc_macro::TokenStream;

/// Schedules an async function.
#[proc_macro_attribute]
pub fn scheduled(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Runs a scheduled function under a cluster-wide lock.
#[proc_macro_attribute]
pub fn scheduler_lock(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
