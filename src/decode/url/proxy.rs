//! Which proxy a request goes through (pure), from the environment as curl reads it
//! (lib/url.c `detect_proxy`, lib/noproxy.c): `http_proxy` for http (lower case only, as curl:
//! `HTTP_PROXY` can be set by a CGI request's `Proxy:` header), `https_proxy` or `HTTPS_PROXY`
//! for https, else `all_proxy`/`ALL_PROXY`; none for a host `no_proxy`/`NO_PROXY` names.

use std::net::IpAddr;

use url::{Host, Url};

/// The proxy for `url` (an address to give ureq: `http://host:port` when the variable has no
/// scheme, as curl assumes), or None; `env` reads a variable (empty counts as unset).
pub fn choose(url: &Url, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let scheme_var = match url.scheme() {
        "http" => get("http_proxy"),
        _ => get("https_proxy").or_else(|| get("HTTPS_PROXY")),
    };
    let proxy = scheme_var.or_else(|| get("all_proxy")).or_else(|| get("ALL_PROXY"))?;
    let no_proxy = get("no_proxy").or_else(|| get("NO_PROXY")).unwrap_or_default();
    if bypassed(url, &no_proxy) {
        return None;
    }
    let proxy = proxy.trim();
    Some(if proxy.contains("://") { proxy.to_string() } else { format!("http://{proxy}") })
}

/// Whether `list` (NO_PROXY: names separated by commas or blanks) names `url`'s host: `*`
/// names every host; a name matches itself and its subdomains (a leading `.` changes
/// nothing); an address matches itself, or lies within an `ADDR/BITS` range.
fn bypassed(url: &Url, list: &str) -> bool {
    let Some(host) = url.host() else { return false };
    let ip = match &host {
        Host::Ipv4(a) => Some(IpAddr::V4(*a)),
        Host::Ipv6(a) => Some(IpAddr::V6(*a)),
        Host::Domain(_) => None,
    };
    let name = match &host {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        _ => String::new(),
    };
    list.split([',', ' ', '\t']).filter(|t| !t.is_empty()).any(|token| {
        if token == "*" {
            return true;
        }
        match ip {
            Some(ip) => in_range(ip, token.trim_start_matches('[').trim_end_matches(']')),
            None => {
                let t = token.trim_start_matches('.').trim_end_matches('.').to_ascii_lowercase();
                !t.is_empty()
                    && (name == t
                        || name.len() > t.len()
                            && name.ends_with(&t)
                            && name.as_bytes()[name.len() - t.len() - 1] == b'.')
            }
        }
    })
}

/// Whether `ip` is `token` (an address) or within it (`ADDR/BITS`).
fn in_range(ip: IpAddr, token: &str) -> bool {
    let (addr, bits) = match token.split_once('/') {
        Some((a, b)) => match b.parse::<u32>() {
            Ok(b) => (a, Some(b)),
            Err(_) => return false,
        },
        None => (token, None),
    };
    let Ok(net) = addr.parse::<IpAddr>() else { return false };
    let (a, b, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let bits = bits.unwrap_or(width);
    if bits > width {
        return false;
    }
    let shift = width - bits;
    shift >= 128 || (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    fn pick(url: &str, vars: &[(&str, &str)]) -> Option<String> {
        choose(&Url::parse(url).unwrap(), &with(vars))
    }

    #[test]
    fn the_variable_for_the_scheme_as_curl() {
        let p = [("https_proxy", "proxy:3128"), ("http_proxy", "http://hp:80")];
        assert_eq!(pick("https://h/x", &p).as_deref(), Some("http://proxy:3128"));
        assert_eq!(pick("http://h/x", &p).as_deref(), Some("http://hp:80"));
        // HTTP_PROXY in capitals is not read (curl: a CGI's Proxy: header sets it).
        assert_eq!(pick("http://h/x", &[("HTTP_PROXY", "p:1")]), None);
        assert_eq!(pick("https://h/x", &[("HTTPS_PROXY", "p:1")]).as_deref(), Some("http://p:1"));
        assert_eq!(pick("http://h/x", &[("ALL_PROXY", "p:2")]).as_deref(), Some("http://p:2"));
        assert_eq!(
            pick("https://h/x", &[("https_proxy", ""), ("all_proxy", "https://p:3")]).as_deref(),
            Some("https://p:3")
        );
        assert_eq!(pick("https://h/x", &[]), None);
    }

    #[test]
    fn no_proxy_names_hosts_domains_and_ranges() {
        let p = |np: &'static str| [("https_proxy", "p:1"), ("NO_PROXY", np)];
        assert_eq!(pick("https://a.example.com/x", &p("example.com")), None);
        assert_eq!(pick("https://example.com/x", &p(".example.com")), None);
        assert_eq!(pick("https://EXAMPLE.com./x", &p("example.com")), None);
        assert!(pick("https://badexample.com/x", &p("example.com")).is_some());
        assert_eq!(pick("https://h/x", &p("*")), None);
        assert_eq!(pick("https://127.0.0.1:8/x", &p("localhost, 127.0.0.1")), None);
        assert_eq!(pick("https://10.1.2.3/x", &p("10.0.0.0/8")), None);
        assert!(pick("https://11.1.2.3/x", &p("10.0.0.0/8")).is_some());
        assert_eq!(pick("https://[::1]:8/x", &p("::1")), None);
        assert_eq!(pick("https://[fd00::5]/x", &p("fd00::/8")), None);
        assert!(pick("https://127.0.0.1/x", &p("127.0.0.2,localhost")).is_some());
        // no_proxy in lower case is read first.
        let both = [("https_proxy", "p:1"), ("no_proxy", "a"), ("NO_PROXY", "b")];
        assert_eq!(pick("https://a/x", &both), None);
        assert!(pick("https://b/x", &both).is_some());
    }
}
