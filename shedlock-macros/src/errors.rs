//! Collecting every mistake before reporting them together.

use proc_macro2::{Span, TokenStream};

/// The errors found so far. [`Errors::into_compile_error`] reports them all at once.
#[derive(Default)]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
}

impl Errors {
    /// Records `error` after the others.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.combined {
            Some(combined) => combined.combine(error),
            None => self.combined = Some(error),
        }
    }

    /// Records an error with `message` at `span`.
    pub(crate) fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// How many errors were recorded.
    pub(crate) fn len(&self) -> usize {
        self.combined.as_ref().map_or(0, |e| e.into_iter().count())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.combined.is_none()
    }

    /// The errors as `compile_error!` invocations. It is empty if there are none.
    pub(crate) fn into_compile_error(self) -> TokenStream {
        self.combined
            .map(syn::Error::into_compile_error)
            .unwrap_or_default()
    }

    #[cfg(test)]
    pub(crate) fn messages(&self) -> Vec<String> {
        self.combined
            .iter()
            .flat_map(|e| e.clone().into_iter().map(|e| e.to_string()))
            .collect()
    }
}
