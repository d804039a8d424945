//! Generating the locked function.
//!
//! ```text
//! #[scheduled_lock(name = "report-{tenant}", at_most = "10m")]
//! async fn report(tenant: &str) -> T { body }
//! ```
//! becomes
//! ```text
//! async fn report(tenant: &str) -> Result<Option<T>, shedlock_core::Error> {
//!     let config = __private::config(format_args!("report-{tenant}"), Some(600 s), 0 s, false)?;
//!     let executor = __private::default_executor()?;   // or __private::executor(&(expr))
//!     __private::execute(executor, config, async move { <type check>; body }).await
//! }
//! ```

use std::time::Duration;

use proc_macro2::{Delimiter, Group, Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, GenericArgument, Ident, Pat, PathArguments, ReturnType, Safety, Signature,
    Token, Type, Visibility, braced,
};

use crate::args::{self, Args};
use crate::errors::Errors;

/// The attribute: `args` are its arguments, `item` the function it is on.
pub(crate) fn scheduled_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let function = match syn::parse2::<LockedFn>(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            errors.push(error);
            // Still check the arguments, so every mistake shows at once.
            let _ = args::parse(args, None, &mut errors);
            return with_errors(item, errors);
        }
    };
    check_signature(&function.sig, &mut errors);
    let signature_ok = errors.is_empty();
    let scope = args::NameScope {
        fn_name: &function.sig.ident,
        params: template_params(&function.sig),
    };
    let args = args::parse(args, Some(&scope), &mut errors);
    let job_ok = check_scheduled(&function.sig, &args, &mut errors);
    if !signature_ok {
        // The function cannot be wrapped: emit it unchanged, so only our errors show.
        return with_errors(item, errors);
    }
    let expanded = expand(function, &args, job_ok);
    with_errors(expanded, errors)
}

/// The item followed by the errors, as tokio's `token_stream_with_error` does, so that the function
/// stays defined and one mistake does not cascade into errors at every call site.
fn with_errors(mut tokens: TokenStream, errors: Errors) -> TokenStream {
    tokens.extend(errors.into_compile_error());
    tokens
}

/// The function, with its body kept as tokens. Not parsing the body is faster, and rustc then
/// reports a syntax error in it where it is.
struct LockedFn {
    outer_attrs: Vec<Attribute>,
    vis: Visibility,
    sig: Signature,
    inner_attrs: Vec<Attribute>,
    brace_span: Span,
    body: TokenStream,
}

impl Parse for LockedFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let outer_attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let looks_like_fn = input.peek(Token![fn])
            || input.peek(Token![async])
            || input.peek(Token![const])
            || input.peek(Token![unsafe])
            || input.peek(Token![extern]);
        if !looks_like_fn {
            return Err(input.error("`#[scheduled_lock]` goes on an `async fn`"));
        }
        let sig: Signature = input.parse()?;
        let content;
        let brace = braced!(content in input);
        let inner_attrs = content.call(Attribute::parse_inner)?;
        let body: TokenStream = content.parse()?;
        Ok(Self {
            outer_attrs,
            vis,
            sig,
            inner_attrs,
            brace_span: brace.span.join(),
            body,
        })
    }
}

/// Rejects what cannot be wrapped: non-async, `const`, `unsafe`, `extern` and variadic fns.
fn check_signature(sig: &Signature, errors: &mut Errors) {
    // In source order: `const async unsafe extern "C" fn f(...)`.
    if let Some(constness) = &sig.constness {
        errors.at(
            constness.span,
            "`#[scheduled_lock]` cannot go on a `const fn`: remove `const`",
        );
    }
    if let Safety::Unsafe(unsafety) = &sig.safety {
        errors.at(
            unsafety.span,
            "`#[scheduled_lock]` cannot go on an `unsafe fn`: make the function safe and put \
             `unsafe` blocks in its body",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.at(
            abi.span(),
            "`#[scheduled_lock]` cannot go on an `extern` function: remove the ABI",
        );
    }
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token.span,
            "`#[scheduled_lock]` goes on an `async fn`: add `async` before `fn`",
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.at(
            variadic.dots.spans[0],
            "`#[scheduled_lock]` cannot go on a variadic function",
        );
    }
}

/// Whether the job function can be generated: a function with a schedule is registered as a job,
/// which a scheduler calls with nothing, so it must take no arguments and name no `self`.
fn check_scheduled(sig: &Signature, args: &Args, errors: &mut Errors) -> bool {
    if args.schedule_span.is_none() {
        return false;
    }
    let mut ok = true;
    if !sig.inputs.is_empty() {
        ok = false;
        errors.at(
            sig.inputs.span(),
            "a scheduled function takes no arguments (the scheduler has none to pass): register \
             a closure with `Job::new(name, schedule, |run| async move { ... })` instead",
        );
    }
    if let Some(executor) = &args.executor
        && mentions_self(executor.to_token_stream())
    {
        ok = false;
        errors.at(
            executor.span(),
            "a scheduled function cannot use `executor = self...` (the scheduler has no `self` \
             to call it on): register a closure with `Job::new(name, schedule, ...)` instead",
        );
    }
    ok && args.schedule.is_some()
}

fn mentions_self(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => ident == "self",
        proc_macro2::TokenTree::Group(group) => mentions_self(group.stream()),
        _ => false,
    })
}

/// The arguments a name template may use: those bound to a plain identifier.
fn template_params(sig: &Signature) -> Vec<Ident> {
    sig.inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(pat) if pat.subpat.is_none() => Some(pat.ident.clone()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect()
}

fn expand(function: LockedFn, args: &Args, job_ok: bool) -> TokenStream {
    let LockedFn {
        outer_attrs,
        vis,
        mut sig,
        inner_attrs,
        brace_span,
        body,
    } = function;
    let private = quote!(::shedlock_core::__private);
    let site = Span::mixed_site();

    // The declared return type `T`, and an inference-only copy of it for the body's type check.
    let (output, checked_output, output_span) = match &sig.output {
        ReturnType::Default => (quote!(()), quote!(()), sig.ident.span()),
        ReturnType::Type(_, ty) => (
            ty.to_token_stream(),
            erase_impl_trait(ty).to_token_stream(),
            ty.span(),
        ),
    };
    sig.output = syn::parse_quote! {
        -> ::core::result::Result<::core::option::Option<#output>, #private::Error>
    };

    // Without a valid name there are errors already: any name does, as the code never runs.
    let name = args.name.as_ref().map_or_else(
        || quote!(::core::format_args!("invalid")),
        |lit| quote!(::core::format_args!(#lit)),
    );
    let (at_most, at_least, lock_at_least) = durations(args);
    let keep_alive = args.keep_alive;
    let executor = args.executor.as_ref().map_or_else(
        || quote!(#private::default_executor()?),
        |expr| {
            // Spanned on the expression, so a wrong type is reported there.
            let span = expr.span();
            let mut expr = Group::new(Delimiter::None, expr.to_token_stream());
            expr.set_span(span);
            quote_spanned!(span=> ::shedlock_core::__private::executor(&#expr))
        },
    );

    // `if false { return <value of type T>; }` first, so the body's type is inferred as T and a
    // mismatch is reported in the body, against the declared return type.
    let return_binding = Ident::new("__shedlock_return", output_span);
    let fake_return = quote_spanned! {output_span=>
        #[allow(
            unknown_lints,
            unreachable_code,
            clippy::diverging_sub_expression,
            clippy::empty_loop,
            clippy::let_unit_value,
            clippy::let_with_type_underscore,
            clippy::needless_return,
            clippy::unreachable,
            clippy::used_underscore_binding
        )]
        if false {
            let #return_binding: #checked_output = loop {};
            return #return_binding;
        }
    };
    // The body's statements are the async block's own, after the type check: nested in a
    // block of their own, a one-line body (`{ 1 }`) would draw rustc's `unused_braces` on the
    // user's braces, with a suggestion that does not compile (`-> u32 1`).
    let mut block = Group::new(
        Delimiter::Brace,
        quote! {
            #fake_return
            #body
        },
    );
    block.set_span(brace_span);
    let task = quote_spanned! {brace_span=>
        async move #block
    };

    let job = args.schedule.as_ref().filter(|_| job_ok).map(|schedule| {
        job_fn(
            &vis, &sig.ident, schedule, &name, &at_most, &at_least, keep_alive, &task,
        )
    });
    let config = Ident::new("__shedlock_config", site);
    let executor_binding = Ident::new("__shedlock_executor", site);
    let inner_attrs = inner_attrs.into_iter().map(|mut attr| {
        // Inner attributes (`#![allow(...)]`) move out of the body, to the function.
        attr.style = syn::AttrStyle::Outer;
        attr
    });
    quote! {
        #(#outer_attrs)*
        #(#inner_attrs)*
        #vis #sig {
            let #config = #private::config(#name, #at_most, #lock_at_least, #keep_alive)?;
            let #executor_binding = #executor;
            #private::execute(#executor_binding, #config, #task).await
        }
        #job
    }
}

/// `<fn>_job()`: the scheduled job, whose body is the function's. It takes no lock of its own, as
/// the scheduler runs it under the fire's lock.
#[allow(clippy::too_many_arguments)]
fn job_fn(
    vis: &Visibility,
    ident: &Ident,
    schedule: &args::ScheduleArg,
    name: &TokenStream,
    at_most: &TokenStream,
    at_least: &TokenStream,
    keep_alive: bool,
    task: &TokenStream,
) -> TokenStream {
    let private = quote!(::shedlock_core::__private);
    let schedule = match schedule {
        args::ScheduleArg::Every(every) => {
            let every = duration(*every);
            quote!(#private::every(#every))
        }
        args::ScheduleArg::EveryExpr(expr) => {
            let every = duration_value(expr);
            quote!(#private::every(#every))
        }
        args::ScheduleArg::Cron { expression, zone } => {
            let expression = string_value(expression);
            let zone = zone.as_ref().map_or_else(|| quote!("UTC"), string_value);
            quote!(#private::cron(#expression, #zone))
        }
    };
    let job_fn = Ident::new(&format!("{ident}_job"), ident.span());
    let doc = format!(
        " The scheduled job of [`{ident}`]: register it with `scheduler.add({ident}_job()?)?`. \
         The scheduler claims each fire and runs the body under the fire's lock."
    );
    quote! {
        #[doc = #doc]
        #vis fn #job_fn() -> ::core::result::Result<#private::Job, #private::Error> {
            #private::job(#name, #schedule, #at_most, #at_least, #keep_alive, move |_| #task)
        }
    }
}

/// `at_most`, an `Option<Duration>`, a scheduled job's `at_least`, a `Duration` zero when unset,
/// and a plain run's `at_least`, an `Option<Duration>` where unset means the executor's default.
fn durations(args: &Args) -> (TokenStream, TokenStream, TokenStream) {
    let at_most = match (&args.at_most, &args.at_most_expr) {
        (_, Some(expr)) => duration_expr(expr),
        (Some(at_most), None) => {
            let duration = duration(at_most.value);
            quote!(::core::option::Option::Some(#duration))
        }
        (None, None) => quote!(::core::option::Option::None),
    };
    // Unset: the executor's default_at_least for a plain run, zero for a scheduled job.
    let (at_least, lock_at_least) = match (&args.at_least, &args.at_least_expr) {
        (_, Some(expr)) => (duration_value(expr), duration_expr(expr)),
        (Some(at_least), None) => {
            let duration = duration(at_least.value);
            (
                duration.clone(),
                quote!(::core::option::Option::Some(#duration)),
            )
        }
        (None, None) => (
            duration(Duration::ZERO),
            quote!(::core::option::Option::None),
        ),
    };
    (at_most, at_least, lock_at_least)
}

/// `Some(expr)` for a duration given as an expression, such as `Duration::from_secs(..)`, spanned
/// on it so that a value of the wrong type is reported there. `LockConfig` checks its range when
/// the function is called.
fn duration_expr(expr: &syn::Expr) -> TokenStream {
    quote_spanned! {expr.span()=>
        ::core::option::Option::Some::<::core::time::Duration>(#expr)
    }
}

/// The duration expression itself, typed as a `Duration`. A scheduled job's `at_least` uses it.
fn duration_value(expr: &syn::Expr) -> TokenStream {
    quote_spanned! {expr.span()=>
        {
            let __shedlock_duration: ::core::time::Duration = #expr;
            __shedlock_duration
        }
    }
}

/// A string argument: the literal, or the expression, a `&str`, a `String` or a `Cow<str>`, as a
/// `&str`, spanned on the expression so that a value of the wrong type is reported there.
fn string_value(value: &args::Value) -> TokenStream {
    match value {
        args::Value::Lit(text) => quote!(#text),
        args::Value::Expr(expr) => quote_spanned! {expr.span()=>
            ::core::convert::AsRef::<str>::as_ref(&#expr)
        },
    }
}

/// A `Duration` constant expression.
fn duration(value: Duration) -> TokenStream {
    if value.subsec_nanos().is_multiple_of(1_000_000) {
        let millis = Literal::u64_unsuffixed(u64::try_from(value.as_millis()).unwrap_or(u64::MAX));
        quote!(::core::time::Duration::from_millis(#millis))
    } else {
        let secs = Literal::u64_unsuffixed(value.as_secs());
        let nanos = Literal::u32_unsuffixed(value.subsec_nanos());
        quote!(::core::time::Duration::new(#secs, #nanos))
    }
}

/// `ty` with every `impl Trait` replaced by `_`, for a `let` type annotation, which does not allow
/// `impl Trait`.
fn erase_impl_trait(ty: &Type) -> Type {
    let mut ty = ty.clone();
    erase_in(&mut ty);
    ty
}

fn erase_in(ty: &mut Type) {
    match ty {
        Type::ImplTrait(impl_trait) => {
            *ty = Type::Infer(syn::TypeInfer {
                attrs: Vec::new(),
                underscore_token: Token![_](impl_trait.impl_token.span),
            });
        }
        Type::Array(t) => erase_in(&mut t.elem),
        Type::Group(t) => erase_in(&mut t.elem),
        Type::Paren(t) => erase_in(&mut t.elem),
        Type::Ptr(t) => erase_in(&mut t.elem),
        Type::Reference(t) => erase_in(&mut t.elem),
        Type::Slice(t) => erase_in(&mut t.elem),
        Type::Tuple(t) => t.elems.iter_mut().for_each(erase_in),
        Type::Path(t) => {
            for segment in &mut t.path.segments {
                if let PathArguments::AngleBracketed(generics) = &mut segment.arguments {
                    for arg in &mut generics.args {
                        if let GenericArgument::Type(ty) = arg {
                            erase_in(ty);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(args: TokenStream, item: TokenStream) -> String {
        scheduled_lock(args, item).to_string()
    }

    #[test]
    fn wraps_the_body_and_changes_the_return_type() {
        let out = expand_str(
            quote!(
                name = "report-{tenant}",
                at_most = "10m",
                at_least = "PT0.5S",
                keep_alive
            ),
            quote!(
                /// Docs stay.
                pub async fn report(tenant: &str) -> u32 {
                    #![allow(unused)]
                    1
                }
            ),
        );
        for needle in [
            "# [doc = r\" Docs stay.\"] # [allow (unused)] pub async fn report (tenant : & str)",
            "-> :: core :: result :: Result < :: core :: option :: Option < u32 > , :: shedlock_core :: __private :: Error >",
            ":: core :: format_args ! (\"report-{tenant}\")",
            ":: core :: option :: Option :: Some (:: core :: time :: Duration :: from_millis (600000))",
            ":: core :: time :: Duration :: from_millis (500)",
            ", true) ?",
            ":: shedlock_core :: __private :: default_executor () ?",
            "let __shedlock_return : u32 = loop { }",
            "return __shedlock_return ; } 1 }) . await",
        ] {
            assert!(out.contains(needle), "{needle}\nnot in\n{out}");
        }
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn uses_the_given_executor() {
        let out = expand_str(
            quote!(name = "a", executor = self.locks),
            quote!(
                async fn a(&self) {}
            ),
        );
        assert!(
            out.contains(":: shedlock_core :: __private :: executor (& self . locks)"),
            "{out}"
        );
        assert!(out.contains("Option < () >"), "{out}");
    }

    #[test]
    fn erases_impl_trait_for_the_type_check() {
        let ty: Type = syn::parse_quote!(Result<(impl Display, Vec<&impl Debug>), E>);
        assert_eq!(
            erase_impl_trait(&ty).to_token_stream().to_string(),
            "Result < (_ , Vec < & _ >) , E >"
        );
    }

    #[test]
    fn sub_millisecond_durations_keep_their_nanos() {
        assert_eq!(
            duration(Duration::new(1, 500)).to_string(),
            ":: core :: time :: Duration :: new (1 , 500)"
        );
    }

    #[test]
    fn a_bad_function_is_emitted_unchanged_with_every_error() {
        let out = expand_str(
            quote!(nme = "x"),
            quote!(
                const unsafe fn f() {}
            ),
        );
        assert!(out.starts_with("const unsafe fn f () { }"), "{out}");
        // const, unsafe, not async, and the unknown `nme` (which suggests `name`, so a missing
        // name is not reported on top).
        assert_eq!(out.matches("compile_error").count(), 4, "{out}");
    }

    #[test]
    fn bad_arguments_still_expand_with_placeholders() {
        let out = expand_str(
            quote!(name = "r-{nope}", at_most = "1x"),
            quote!(
                async fn f() {}
            ),
        );
        assert!(out.contains("format_args ! (\"invalid\")"), "{out}");
        assert!(out.contains(":: core :: option :: Option :: None"), "{out}");
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
    }

    #[test]
    fn not_a_function() {
        let out = expand_str(
            quote!(name = "a"),
            quote!(
                struct S;
            ),
        );
        assert!(out.starts_with("struct S ;"), "{out}");
        assert!(out.contains("goes on an `async fn`"), "{out}");
    }
}
