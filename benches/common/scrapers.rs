//! What the strangers bench and the strangers' tests share (the tests include this file): an
//! old hub's commands written in one statement, and one answer read from a keep-alive HTTP/1.1
//! connection.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

/// Reads one answer of a keep-alive connection: the status, or `None` when the connection ended.
pub fn read_answer(reader: &mut BufReader<TcpStream>) -> Option<u16> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let (mut length, mut chunked) = (0usize, false);
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        if header == "transfer-encoding: chunked" {
            chunked = true;
        }
    }
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
        }
    } else {
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).ok()?;
    }
    Some(status)
}

/// Adds commands to the database at `db` until it holds `commands` of them: copies of its first
/// one, done long ago, written in one statement (the first stays as it is).
pub fn add_done_commands(db: &std::path::Path, commands: u32) -> rusqlite::Result<usize> {
    rusqlite::Connection::open(db)?.execute(
        "INSERT INTO command (batch_id, seq, type, params, status, finished_at)
         WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
         SELECT c.batch_id, n.i, c.type, c.params, 'done', '2026-11-29T10:00:00.000Z'
         FROM n, (SELECT batch_id, type, params FROM command LIMIT 1) c",
        [commands],
    )
}
