//! The YAML subset twemproxy configurations use: nested block maps, block lists (`- item`),
//! flow lists (`[a, b]`), plain or quoted scalars and `#` comments. Every node remembers
//! its 1-based line so configuration errors can name it.
//!
//! Anchors, multi-line scalars and multiple documents are not supported; a leading `---`
//! and a trailing `...` are accepted and ignored.

use crate::error::ConfigError;

/// A parsed YAML node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A scalar with quotes removed.
    Scalar(String),
    /// A list of `(line, item)`.
    List(Vec<(usize, Node)>),
    /// A map of `(key, line, value)` in file order (duplicates are rejected).
    Map(Vec<(String, usize, Node)>),
}

/// A scalar directive's value: an error naming `key` and `line` when it is empty or not
/// a single value.
pub(crate) fn scalar<'a>(key: &str, line: usize, node: &'a Node) -> Result<&'a str, ConfigError> {
    match node {
        Node::Scalar(s) if !s.is_empty() => Ok(s),
        Node::Scalar(_) => Err(ConfigError::at(line, key, "missing value")),
        _ => Err(ConfigError::at(line, key, "expected a single value")),
    }
}

/// A `true`/`false` directive's value.
pub(crate) fn boolean(key: &str, line: usize, node: &Node) -> Result<bool, ConfigError> {
    match scalar(key, line, node)? {
        "true" => Ok(true),
        "false" => Ok(false),
        s => Err(ConfigError::at(
            line,
            key,
            format!("'{s}' is not 'true' or 'false'"),
        )),
    }
}

#[derive(Debug)]
struct Line<'a> {
    no: usize,
    indent: usize,
    text: &'a str,
}

/// Parses a document into its top-level node (a map for twemproxy configs).
///
/// Guarantees: either a tree whose every node came from the text, or a [`ConfigError`]
/// naming the offending line. Never panics on any input.
pub fn parse(text: &str) -> Result<Node, ConfigError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        if raw.contains('\t') && raw.trim_start_matches(' ').starts_with('\t') {
            return Err(ConfigError::at(
                no,
                "",
                "tabs are not allowed for indentation",
            ));
        }
        let stripped = strip_comment(raw);
        let trimmed = stripped.trim_end();
        if trimmed.trim().is_empty() {
            continue;
        }
        if no == 1 && trimmed.trim() == "---" {
            continue;
        }
        if trimmed.trim() == "..." || trimmed.trim() == "---" {
            continue;
        }
        let indent = trimmed.len() - trimmed.trim_start().len();
        lines.push(Line {
            no,
            indent,
            text: trimmed.trim_start(),
        });
    }
    if lines.is_empty() {
        return Ok(Node::Map(Vec::new()));
    }
    let mut pos = 0;
    let indent = lines[0].indent;
    let node = block(&lines, &mut pos, indent)?;
    if let Some(l) = lines.get(pos) {
        return Err(ConfigError::at(l.no, "", "unexpected indentation"));
    }
    Ok(node)
}

/// Removes a `#` comment that starts the line or follows whitespace, outside quotes.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => {
                if b == b'"' || b == b'\'' {
                    quote = Some(b);
                } else if b == b'#' && (i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t') {
                    return &line[..i];
                }
            }
        }
    }
    line
}

fn block(lines: &[Line<'_>], pos: &mut usize, indent: usize) -> Result<Node, ConfigError> {
    let first = &lines[*pos];
    if is_list_item(first.text) {
        list(lines, pos, indent)
    } else {
        map(lines, pos, indent)
    }
}

fn is_list_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

fn list(lines: &[Line<'_>], pos: &mut usize, indent: usize) -> Result<Node, ConfigError> {
    let mut items = Vec::new();
    while let Some(l) = lines.get(*pos) {
        if l.indent < indent {
            break;
        }
        if l.indent > indent || !is_list_item(l.text) {
            return Err(ConfigError::at(l.no, "", "bad indentation in list"));
        }
        let rest = l.text[1..].trim();
        if rest.is_empty() || rest.contains(": ") || rest.ends_with(':') {
            return Err(ConfigError::at(
                l.no,
                "",
                "only scalar list items are supported",
            ));
        }
        items.push((l.no, Node::Scalar(parse_scalar(rest, l.no)?)));
        *pos += 1;
    }
    Ok(Node::List(items))
}

fn map(lines: &[Line<'_>], pos: &mut usize, indent: usize) -> Result<Node, ConfigError> {
    let mut entries: Vec<(String, usize, Node)> = Vec::new();
    while let Some(l) = lines.get(*pos) {
        if l.indent < indent {
            break;
        }
        if l.indent > indent {
            return Err(ConfigError::at(l.no, "", "unexpected indentation"));
        }
        if is_list_item(l.text) {
            return Err(ConfigError::at(
                l.no,
                "",
                "list item where a key was expected",
            ));
        }
        let (key, value) =
            split_key(l.text).ok_or_else(|| ConfigError::at(l.no, "", "expected 'key: value'"))?;
        let key = parse_scalar(key, l.no)?;
        if entries.iter().any(|(k, _, _)| *k == key) {
            return Err(ConfigError::at(l.no, &key, "duplicate key"));
        }
        *pos += 1;
        let node = if value.is_empty() {
            match lines.get(*pos) {
                Some(next) if next.indent > indent => block(lines, pos, next.indent)?,
                // YAML lets a block list sit at its key's indentation.
                Some(next) if next.indent == indent && is_list_item(next.text) => {
                    list(lines, pos, indent)?
                }
                _ => Node::Scalar(String::new()),
            }
        } else if let Some(inner) = value.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| ConfigError::at(l.no, &key, "unclosed '['"))?;
            let items = inner
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Ok((l.no, Node::Scalar(parse_scalar(s, l.no)?))))
                .collect::<Result<Vec<_>, ConfigError>>()?;
            Node::List(items)
        } else {
            Node::Scalar(parse_scalar(value, l.no)?)
        };
        entries.push((key, l.no, node));
    }
    Ok(Node::Map(entries))
}

/// Splits `key: value` / `key:` at the first `:` followed by a space or the end.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') => {
                return Some((text[..i].trim(), text[i + 1..].trim()));
            }
            None => {}
        }
    }
    None
}

fn parse_scalar(s: &str, line: usize) -> Result<String, ConfigError> {
    let s = s.trim();
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q) {
            return inner
                .strip_suffix(q)
                .map(str::to_string)
                .ok_or_else(|| ConfigError::at(line, "", "unterminated quoted string"));
        }
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_twemproxy_shape() {
        let text = "# comment\nalpha:\n  listen: 127.0.0.1:22121\n  hash: fnv1a_64 # trailing\n  servers:\n   - 127.0.0.1:11211:1 one\n   - \"127.0.0.1:11212:1\"\nbeta:\n  listen: 127.0.0.1:22122\n  servers: [a:1:1, b:2:1]\n";
        let Node::Map(pools) = parse(text).unwrap() else {
            panic!()
        };
        assert_eq!(pools.len(), 2);
        assert_eq!(pools[0].0, "alpha");
        assert_eq!(pools[0].1, 2);
        let Node::Map(alpha) = &pools[0].2 else {
            panic!()
        };
        assert_eq!(alpha[1].2, Node::Scalar("fnv1a_64".into()));
        let Node::List(servers) = &alpha[2].2 else {
            panic!()
        };
        assert_eq!(
            servers[0],
            (6, Node::Scalar("127.0.0.1:11211:1 one".into()))
        );
        assert_eq!(servers[1], (7, Node::Scalar("127.0.0.1:11212:1".into())));
    }

    #[test]
    fn list_at_key_indent_and_errors() {
        let text = "a:\n  servers:\n  - x:1:1\n  - y:1:1\n";
        assert!(parse(text).is_ok());
        let err = parse("a:\n  listen x\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("a:\n  k: v\n  k: w\n").unwrap_err();
        assert_eq!((err.line, err.field.as_str()), (3, "k"));
        let err = parse("a:\n  k: v\n     j: w\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(parse("a:\n  k: \"v\n").is_err());
    }
}
