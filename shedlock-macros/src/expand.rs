//! Code generation: the user's function, unchanged, plus a hidden type of the same name that
//! builds its `Job` (`shedlock::job!(function)`).

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{Attribute, Ident, Meta, Path};

use crate::attr::{Errors, Lock, LockArgs, Schedule, ScheduleKind, ScheduledArgs};
use crate::signature::{self, JobFn, JobSignature, Param};

/// One of the two attributes; whichever the compiler expands first does the whole expansion.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Macro {
    Scheduled,
    SchedulerLock,
}

impl Macro {
    fn name(self) -> &'static str {
        match self {
            Macro::Scheduled => "scheduled",
            Macro::SchedulerLock => "scheduler_lock",
        }
    }

    /// Which of ours an attribute of the function is, by its last path segment.
    fn of(attr: &Attribute) -> Option<Macro> {
        let last = attr.path().segments.last()?;
        [Macro::Scheduled, Macro::SchedulerLock]
            .into_iter()
            .find(|ours| last.ident == ours.name())
    }
}

/// One of our attributes, found on the function or being expanded.
struct Found {
    args: TokenStream,
    /// Tokens to point "missing argument" errors at (empty: the macro's call site).
    site: TokenStream,
}

/// The argument of the attribute [`take_ours`] leaves on a dummy item for each attribute it
/// consumes: expanding it resolves the attribute's path as the user wrote it, so the user's
/// `use shedlock::scheduler_lock;` does not read as unused. It expands to nothing.
const CONSUMED: &str = "__shedlock_consumed";

pub(crate) fn expand(invoked: Macro, args: TokenStream, item: TokenStream) -> TokenStream {
    if syn::parse2::<Ident>(args.clone()).is_ok_and(|ident| ident == CONSUMED) {
        return TokenStream::new();
    }
    let mut function: JobFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            let error = syn::Error::new(
                error.span(),
                format!("`#[{}]` applies to an `async fn`: {error}", invoked.name()),
            );
            let error = error.into_compile_error();
            return quote!(#item #error);
        }
    };

    let errors = Errors::default();
    let mut consumed = TokenStream::new();
    let [scheduled, lock] = take_ours(&mut function.attrs, invoked, args, &errors, &mut consumed);
    let scheduled = match scheduled {
        Some(found) => Some(ScheduledArgs::parse(found.args, &found.site)),
        None => {
            errors.push(syn::Error::new(
                Span::call_site(),
                "`#[scheduler_lock]` needs `#[scheduled(...)]` on the same function to say when \
                 the job runs; to run other code under a lock, use `LockingTaskExecutor::execute`",
            ));
            None
        }
    };
    let lock_args = lock.map(|found| LockArgs::parse(found.args, &found.site));
    let signature = signature::check(&function.sig);

    let krate = scheduled
        .as_ref()
        .and_then(|args| args.krate.clone())
        .or_else(|| lock_args.as_ref().and_then(|args| args.krate.clone()))
        .unwrap_or_else(|| syn::parse_quote!(::shedlock));
    let schedule = scheduled.and_then(|args| errors.ok(args.schedule));
    let lock = lock_args.map(|args| errors.ok(args.lock));
    let signature = errors.ok(signature);
    if let (Some(signature), None) = (&signature, &lock)
        && let Some(span) = signature.context()
    {
        errors.push(syn::Error::new(
            span,
            "a `LockContext` parameter needs `#[scheduler_lock(name = \"...\")]`: a job \
             without a lock has no lock context to receive",
        ));
    }

    match (errors.finish(), schedule, signature, lock) {
        (Ok(()), Some(schedule), Some(signature), lock) => {
            let job = Codegen {
                function: &function,
                krate: &krate,
                signature: &signature,
            };
            let job = job.expand(&schedule, lock.flatten().as_ref());
            quote!(#job #consumed)
        }
        (result, ..) => {
            let errors = result.err().map(syn::Error::into_compile_error);
            let fallback = fallback(&function, &krate);
            quote!(#function #fallback #consumed #errors)
        }
    }
}

/// Removes `#[scheduled]` / `#[scheduler_lock]` from the function's attributes, together with
/// the invoked one: `[scheduled, scheduler_lock]`. Appends to `consumed` a dummy item for each
/// attribute removed (see [`CONSUMED`]).
fn take_ours(
    attrs: &mut Vec<Attribute>,
    invoked: Macro,
    args: TokenStream,
    errors: &Errors,
    consumed: &mut TokenStream,
) -> [Option<Found>; 2] {
    let slot = |which: Macro| usize::from(which == Macro::SchedulerLock);
    let mut found: [Option<Found>; 2] = [None, None];
    found[slot(invoked)] = Some(Found {
        args,
        site: TokenStream::new(),
    });
    attrs.retain(|attr| {
        let Some(which) = Macro::of(attr) else {
            return true;
        };
        let name = which.name();
        let (path, marker) = (attr.path(), Ident::new(CONSUMED, Span::call_site()));
        consumed.extend(quote!(#[#path(#marker)] const _: () = ();));
        let args = match &attr.meta {
            Meta::List(list) => list.tokens.clone(),
            Meta::Path(_) => TokenStream::new(),
            Meta::NameValue(_) => {
                errors.push(syn::Error::new_spanned(
                    attr,
                    format!("expected `#[{name}(...)]`"),
                ));
                TokenStream::new()
            }
        };
        if found[slot(which)].is_some() {
            errors.push(syn::Error::new_spanned(
                attr,
                format!("`#[{name}]` specified more than once"),
            ));
        } else {
            found[slot(which)] = Some(Found {
                args,
                site: attr.to_token_stream(),
            });
        }
        false
    });
    found
}

/// `#[cfg]`s of the function, repeated on what is generated beside it.
fn cfgs(function: &JobFn) -> impl Iterator<Item = &Attribute> {
    function
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
}

/// The hidden type in the type namespace, beside the function in the value namespace (a braced
/// struct takes no value-namespace name).
fn factory_struct(function: &JobFn) -> TokenStream {
    let cfgs = cfgs(function);
    let vis = &function.vis;
    let name = &function.sig.ident;
    quote! {
        #(#cfgs)*
        #[doc(hidden)]
        #[allow(
            non_camel_case_types,
            dead_code,
            unreachable_pub,
            missing_docs,
            missing_debug_implementations
        )]
        #vis struct #name {}
    }
}

/// After an error: a factory for any state, so `shedlock::job!(function)` elsewhere adds no
/// errors of its own (tokio-macros' "fail soft"). None for a method: items cannot be added to
/// an `impl` block, and that error would only hide the real one.
fn fallback(function: &JobFn, krate: &Path) -> TokenStream {
    if function.sig.receiver().is_some() {
        return TokenStream::new();
    }
    let factory = factory_struct(function);
    let cfgs = cfgs(function);
    let name = &function.sig.ident;
    quote! {
        #factory
        #(#cfgs)*
        impl<__ShedlockState> #krate::__private::JobFactory<__ShedlockState> for #name {
            fn job() -> #krate::__private::Job<__ShedlockState> {
                ::core::unreachable!("the job did not compile")
            }
        }
    }
}

struct Codegen<'a> {
    function: &'a JobFn,
    krate: &'a Path,
    signature: &'a JobSignature,
}

impl Codegen<'_> {
    fn expand(&self, schedule: &Schedule, lock: Option<&Lock>) -> TokenStream {
        let Codegen {
            function,
            krate,
            signature,
        } = self;
        let private = quote!(#krate::__private);
        let name = &function.sig.ident;
        let job_name = name.unraw().to_string();
        let factory = factory_struct(function);
        let cfgs = cfgs(function);

        let (impl_generics, state) = match &signature.state {
            Some(state) => (None, state.to_token_stream()),
            None => (
                Some(quote! {
                    <__ShedlockState: ::core::clone::Clone
                        + ::core::marker::Send
                        + ::core::marker::Sync
                        + 'static>
                }),
                quote!(__ShedlockState),
            ),
        };
        let args = signature.params.iter().map(|param| match param {
            Param::State => quote!(__shedlock_state),
            Param::Context(_) => quote!(#private::lock_context()),
        });
        // Spanned so that a return type that is neither `()` nor `Result<_, impl Display>` is
        // reported on it, not inside the runtime.
        let output = quote_spanned! {signature.output_span=>
            #private::IntoJobResult::into_job_result(__shedlock_output)
        };
        let leader = &schedule.leader;
        let schedule = self.schedule(schedule);
        let with_lock = lock.map(|lock| self.with_lock(lock));
        let job = quote! {
            #private::Job::new(#job_name, #schedule, move |__shedlock_state: #state| {
                let __shedlock_fut = async move {
                    let __shedlock_output = #name(#(#args),*).await;
                    #output
                };
                // Call-site span: a future that is not `Send` is reported on the
                // attribute (as axum's `#[debug_handler]` does).
                #private::assert_send(__shedlock_fut)
            })
            #with_lock
        };
        let job = match leader {
            Some(election) => quote!(#private::leader_only(#job, #election)),
            None => job,
        };

        quote! {
            // `async` is required here even for a job that awaits nothing.
            #[allow(clippy::unused_async)]
            #function
            #factory
            #(#cfgs)*
            #[allow(deprecated)]
            impl #impl_generics #private::JobFactory<#state> for #name {
                fn job() -> #private::Job<#state> {
                    #job
                }
            }
        }
    }

    fn schedule(&self, schedule: &Schedule) -> TokenStream {
        let krate = self.krate;
        let private = quote!(#krate::__private);
        let initial_delay = schedule.initial_delay.unwrap_or_default();
        let kind = match &schedule.kind {
            ScheduleKind::Cron(expression) => {
                let zone = option(schedule.zone.as_ref().map(ToTokens::to_token_stream));
                let cron = quote!(#private::cron(#expression, #zone));
                match schedule.initial_delay {
                    Some(delay) => {
                        let delay = duration(delay);
                        quote!(#private::with_initial_delay(#cron, #delay))
                    }
                    None => cron,
                }
            }
            ScheduleKind::FixedRate(period) => {
                let (period, initial_delay) = (duration(*period), duration(initial_delay));
                quote!(#private::fixed_rate(#period, #initial_delay))
            }
            ScheduleKind::FixedDelay(delay) => {
                let (delay, initial_delay) = (duration(*delay), duration(initial_delay));
                quote!(#private::fixed_delay(#delay, #initial_delay))
            }
        };
        let kind = match schedule.misfire_threshold {
            Some(threshold) => {
                let threshold = duration(threshold);
                quote!(#private::with_misfire_threshold(#kind, #threshold))
            }
            None => kind,
        };
        match schedule.catch_up {
            Some(within) => {
                let within = duration(within);
                quote!(#private::with_catch_up(#kind, #within))
            }
            None => kind,
        }
    }

    fn with_lock(&self, lock: &Lock) -> TokenStream {
        let krate = self.krate;
        let name = &lock.name;
        let at_most = option(lock.lock_at_most_for.map(duration));
        let at_least = option(lock.lock_at_least_for.map(duration));
        let keep_alive = option(lock.keep_alive.map(|keep| quote!(#keep)));
        let mut job_lock =
            quote!(#krate::__private::job_lock(#name, #at_most, #at_least, #keep_alive));
        if let Some((retries, backoff)) = lock.retries {
            let backoff = option(backoff.map(duration));
            job_lock = quote!(#krate::__private::with_retries(#job_lock, #retries, #backoff));
        }
        if lock.rerun {
            job_lock = quote!(#krate::__private::rerun_interrupted(#job_lock));
        }
        quote! {
            .with_lock(#job_lock)
        }
    }
}

/// A duration, normalized so the runtime never parses it.
fn duration(duration: Duration) -> TokenStream {
    let secs = Literal::u64_suffixed(duration.as_secs());
    let nanos = Literal::u32_suffixed(duration.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
}

fn option(value: Option<TokenStream>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}
