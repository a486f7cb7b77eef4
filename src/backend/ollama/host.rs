//! `OLLAMA_HOST` as Ollama's own client reads it, so a value that works for `ollama`
//! works here.

use std::net::IpAddr;

/// Turns an `OLLAMA_HOST` value into a base URL, exactly as Ollama's own client does: no
/// scheme means http, a bare host gets port 11434 (80/443 when the scheme is given), an
/// invalid port falls back to the default, and `0.0.0.0` (the address a server listens on)
/// means connect to 127.0.0.1.
///
/// ```
/// use toolloop::backend::parse_host;
///
/// assert_eq!(parse_host(""), "http://127.0.0.1:11434");
/// assert_eq!(parse_host("0.0.0.0"), "http://127.0.0.1:11434");
/// assert_eq!(parse_host("example.com"), "http://example.com:11434");
/// assert_eq!(parse_host("https://example.com"), "https://example.com:443");
/// assert_eq!(parse_host("[::1]:8080"), "http://[::1]:8080");
/// ```
pub fn parse_host(value: &str) -> String {
    let s = value.trim();
    let mut default_port = "11434";
    let (scheme, hostport) = match s.split_once("://") {
        None => {
            if s == "ollama.com" {
                ("https", "ollama.com:443")
            } else {
                ("http", s)
            }
        }
        Some((scheme, rest)) => {
            match scheme {
                "http" => default_port = "80",
                "https" => default_port = "443",
                _ => {}
            }
            (scheme, rest)
        }
    };
    let (hostport, path) = match hostport.split_once('/') {
        Some((hp, path)) => (hp, path),
        None => (hostport, ""),
    };
    let (host, port) = match split_host_port(hostport) {
        Some((h, p)) => (h.to_string(), p.to_string()),
        None => {
            let trimmed = hostport.trim_matches(|c| c == '[' || c == ']');
            let host = if let Ok(ip) = trimmed.parse::<IpAddr>() {
                ip.to_string()
            } else if !hostport.is_empty() {
                hostport.to_string()
            } else {
                "127.0.0.1".to_string()
            };
            (host, default_port.to_string())
        }
    };
    let port = match port.parse::<u32>() {
        Ok(n) if n <= 65535 => port,
        _ => default_port.to_string(),
    };
    // Go dials an empty host (":1234") as the local machine, and 0.0.0.0 is where a server
    // listens, not an address to connect to.
    let host = match host.parse::<IpAddr>() {
        _ if host.is_empty() => "127.0.0.1".to_string(),
        Ok(ip) if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        Ok(ip) if ip.is_unspecified() => "::1".to_string(),
        _ => host,
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let mut url = format!("{scheme}://{host}:{port}");
    if !path.is_empty() {
        url.push('/');
        url.push_str(path.trim_end_matches('/'));
    }
    url
}

/// Go's `net.SplitHostPort`: `host:port` or `[v6]:port`; anything else has no port.
fn split_host_port(hp: &str) -> Option<(&str, &str)> {
    if let Some(rest) = hp.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        return Some((host, port));
    }
    let (host, port) = hp.split_once(':')?;
    if port.contains(':') {
        return None;
    }
    Some((host, port))
}
