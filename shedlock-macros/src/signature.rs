//! The annotated function: parsed without its body, and checked for a shape the scheduler can
//! call (async, not generic, owned parameters).

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, ReturnType, Signature, Type, Visibility};

use crate::attr::Errors;

/// An `fn` item whose body is kept as tokens: it is never inspected, and a syntax error in it
/// is then reported by the compiler where the user wrote it (as `tracing-attributes` does).
pub(crate) struct JobFn {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    body: TokenStream,
}

impl Parse for JobFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        Ok(JobFn {
            attrs: input.call(Attribute::parse_outer)?,
            vis: input.parse()?,
            sig: input.parse()?,
            body: input.parse()?,
        })
    }
}

impl ToTokens for JobFn {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.append_all(&self.attrs);
        self.vis.to_tokens(tokens);
        self.sig.to_tokens(tokens);
        self.body.to_tokens(tokens);
    }
}

/// What the scheduler passes for one parameter.
pub(crate) enum Param {
    /// The application state, cloned for each run.
    State,
    /// The running job's `LockContext`.
    Context(Span),
}

/// A signature the scheduler can call.
pub(crate) struct JobSignature {
    /// In the user's order.
    pub(crate) params: Vec<Param>,
    pub(crate) state: Option<Type>,
    /// Where an unsupported return type is reported.
    pub(crate) output_span: Span,
}

impl JobSignature {
    /// The `LockContext` parameter's span, if there is one.
    pub(crate) fn context(&self) -> Option<Span> {
        self.params.iter().find_map(|param| match param {
            Param::Context(span) => Some(*span),
            Param::State => None,
        })
    }
}

/// Checks the signature, reporting every problem at once.
pub(crate) fn check(sig: &Signature) -> syn::Result<JobSignature> {
    let errors = Errors::default();
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            "scheduled jobs must be `async`: add `async` before `fn`",
        ));
    }
    if let Some(unsafety) = sig.unsafety {
        errors.push(syn::Error::new(
            unsafety.span,
            "scheduled jobs cannot be `unsafe`: the scheduler calls them from safe code",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "scheduled jobs cannot be generic: the scheduler calls them with one concrete state type",
        ));
    }

    let mut params = Vec::new();
    let mut state: Option<Type> = None;
    let mut has_context = false;
    for input in &sig.inputs {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                errors.push(syn::Error::new_spanned(
                    receiver,
                    "scheduled jobs cannot take `self`: make the job a free function taking the \
                     state as a parameter (`async fn job(state: AppState)`)",
                ));
                continue;
            }
            FnArg::Typed(typed) => typed,
        };
        if let Some(attr) = typed
            .attrs
            .iter()
            .find(|attr| attr.path().is_ident("cfg") || attr.path().is_ident("cfg_attr"))
        {
            errors.push(syn::Error::new_spanned(
                attr,
                "conditional parameters are not supported on scheduled jobs",
            ));
        }
        let ty = &*typed.ty;
        match unwrap_groups(ty) {
            Type::Reference(reference)
                if reference
                    .lifetime
                    .as_ref()
                    .is_none_or(|l| l.ident != "static") =>
            {
                errors.push(syn::Error::new_spanned(
                    reference,
                    "job parameters must be owned: the state is cloned for each run and moved \
                     into a spawned task; take it by value (share data with `Arc` inside the \
                     state) or as `&'static`",
                ))
            }
            Type::ImplTrait(impl_trait) => errors.push(syn::Error::new_spanned(
                impl_trait,
                "`impl Trait` parameters are not supported on scheduled jobs: name the state type",
            )),
            other if is_lock_context(other) => {
                if has_context {
                    errors.push(syn::Error::new_spanned(
                        ty,
                        "a job takes at most one `LockContext` parameter",
                    ));
                }
                has_context = true;
                params.push(Param::Context(ty.span()));
            }
            _ if state.is_some() => errors.push(syn::Error::new_spanned(
                ty,
                "a job takes at most one state parameter (besides an optional `LockContext`): \
                 group what it needs in one state type",
            )),
            _ => {
                state = Some(ty.clone());
                params.push(Param::State);
            }
        }
    }

    let output_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => sig.ident.span(),
    };
    errors.finish().map(|()| JobSignature {
        params,
        state,
        output_span,
    })
}

/// `(T)` and macro-transparent groups around a type.
fn unwrap_groups(mut ty: &Type) -> &Type {
    loop {
        match ty {
            Type::Group(group) => ty = &group.elem,
            Type::Paren(paren) => ty = &paren.elem,
            _ => return ty,
        }
    }
}

/// `LockContext` under any path (`shedlock::LockContext`, a re-export), matched by its last
/// segment as the macro cannot resolve types.
fn is_lock_context(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            path.path.segments.last().is_some_and(|segment| {
                segment.ident == "LockContext" && segment.arguments.is_none()
            })
        }
        _ => false,
    }
}
