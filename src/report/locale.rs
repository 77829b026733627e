//! The run's locale: whether its character set is UTF-8, as GNU tar finds it.

/// Whether the run's locale is UTF-8 (names keep their non-ASCII characters, quotation marks
/// are ‘…’), as GNU tar decides it after `setlocale(LC_ALL, "")`: by the character set of the
/// locale the environment names, if it is installed (`init_locale`); before that (the library's
/// unit tests) by the environment alone.
pub fn utf8_locale() -> bool {
    match LOCALE.get() {
        Some(&utf8) => utf8,
        None => {
            let v = ["LC_ALL", "LC_CTYPE", "LANG"]
                .iter()
                .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
                .unwrap_or_default()
                .to_ascii_lowercase();
            v.contains("utf-8") || v.contains("utf8")
        }
    }
}

/// Set by `init_locale`: the locale's character set is UTF-8.
static LOCALE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Takes LC_CTYPE from the environment, as GNU tar's `setlocale (LC_ALL, "")` does (a locale
/// that is not installed leaves "C"), and notes whether its character set is UTF-8; from then
/// on `report::quote` asks the C library which characters are printable (`iswprint`), so
/// names are escaped as GNU tar escapes them on the same machine. Call before any thread
/// starts (setlocale is not thread-safe).
pub fn init_locale() {
    // Safety: called from main before other threads exist; the empty string is a valid C
    // string; nl_langinfo's result is read before any other locale call.
    let utf8 = unsafe {
        !libc::setlocale(libc::LC_CTYPE, c"".as_ptr()).is_null() && {
            let codeset = libc::nl_langinfo(libc::CODESET);
            !codeset.is_null() && std::ffi::CStr::from_ptr(codeset).to_bytes() == b"UTF-8"
        }
    };
    let _ = LOCALE.set(utf8);
    crate::report::use_libc_printable(utf8);
}
