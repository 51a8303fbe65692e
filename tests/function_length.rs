//! No function of the crate outside its tests runs over `LIMIT` lines (signature to closing
//! brace): a longer one is split into named pieces. Read with syn, so braces in strings and
//! comments do not count; test modules (`#[cfg(test)]`), test files (`tests.rs`, a file that
//! opens with `#![cfg(test)]`) and `#[test]` functions are left out.

use std::path::{Path, PathBuf};

use syn::visit::{self, Visit};

const LIMIT: usize = 80;

/// Whether `attrs` hold `#[cfg(test)]` or `#[test]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
    })
}

/// The functions over the limit in one file: (name, first line, lines).
#[derive(Default)]
struct Long(Vec<(String, usize, usize)>);

impl Long {
    /// The function of `sig` and `body`, unless a test: its lines from `fn` (after its doc
    /// comment and attributes) to the body's closing brace.
    fn note(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, body: &syn::Block) {
        let (first, last) = (
            sig.fn_token.span.start().line,
            body.brace_token.span.close().end().line,
        );
        let lines = last - first + 1;
        if !is_test(attrs) && lines > LIMIT {
            self.0.push((sig.ident.to_string(), first, lines));
        }
    }
}

impl<'ast> Visit<'ast> for Long {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.note(&f.attrs, &f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.note(&f.attrs, &f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.note(&f.attrs, &f.sig, body);
        }
        visit::visit_trait_item_fn(self, f);
    }
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The functions over the limit in `code`, as `name:line (N lines)`.
fn long_functions(code: &str) -> Vec<String> {
    let file = syn::parse_file(code).expect("the file parses");
    if is_test(&file.attrs) {
        return Vec::new();
    }
    let mut long = Long::default();
    long.visit_file(&file);
    long.0
        .into_iter()
        .map(|(name, line, lines)| format!("{name}:{line} ({lines} lines)"))
        .collect()
}

#[test]
fn no_function_outside_tests_is_over_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    files.sort();
    assert!(files.len() > 50, "the crate's sources were found");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("tests.rs")) {
        let code = std::fs::read_to_string(file).expect("read");
        let rel = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        found.extend(
            long_functions(&code)
                .into_iter()
                .map(|f| format!("{rel}: {f}")),
        );
    }
    assert!(
        found.is_empty(),
        "functions over {LIMIT} lines (split them into named pieces):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_counts_functions_and_methods_and_leaves_tests_out() {
    let body = "    let x = \"}\";\n".repeat(LIMIT);
    let code = format!(
        "fn short() {{}}\n/// A doc line.\n#[inline]\nfn long() {{\n{body}}}\nstruct S;\nimpl S {{\n    fn method(&self) {{\n{body}    }}\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{body}    }}\n}}\n#[test]\nfn a_test() {{\n{body}}}\n"
    );
    let found = long_functions(&code);
    assert_eq!(
        found,
        [
            format!("long:4 ({} lines)", LIMIT + 2),
            format!("method:{} ({} lines)", LIMIT + 8, LIMIT + 2)
        ]
    );
    assert!(long_functions(&format!("#![cfg(test)]\n{code}")).is_empty());
}
