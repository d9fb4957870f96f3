// The transport floor of BENCHMARKS §25: the same POST and the same 200 streams read whole, with
// no measurement, by hyper-util's legacy client (llm-probe's) on tokio's multi-thread and
// current-thread runtimes, by one tokio task on a raw TcpStream, and by a blocking std::net loop.
// Not part of the build: a crate of its own, with
//
//   [dependencies]
//   bytes = "=1.12.2"
//   http = "=1.5.0"
//   http-body-util = "=0.1.5"
//   hyper = { version = "=1.12.0", features = ["client", "http1"] }
//   hyper-util = { version = "=0.1.21", features = ["tokio", "client-legacy", "http1"] }
//   tokio = { version = "=1.54.1", features = ["rt-multi-thread", "net", "time", "io-util", "macros"] }
//
// run as `floor {hyper-mt|hyper-ct|raw-ct|std} 200 127.0.0.1:PORT` against
// `llm-probe simulate --ttft 0ms --itl 1ms --tokens 64`.
//! The transport floor: N sequential streams read whole, without any measurement, by
//! hyper-util's legacy client (as llm-probe) on tokio's multi-thread or current-thread runtime,
//! by one tokio task on a raw TcpStream, and by a blocking std::net loop.
use std::io::{Read, Write};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};

const BODY: &str = r#"{"model":"llm-probe-simulator","messages":[{"role":"user","content":"Say hello."}],"max_tokens":64,"stream":true,"stream_options":{"include_usage":true}}"#;

fn request(addr: &str) -> Vec<u8> {
    format!("POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{BODY}", BODY.len()).into_bytes()
}

fn ends(buf: &[u8]) -> bool { buf.ends_with(b"0\r\n\r\n") }

async fn hyper_loop(addr: String, n: usize) -> usize {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let uri: http::Uri = format!("http://{addr}/v1/chat/completions").parse().unwrap();
    let mut total = 0;
    for _ in 0..n {
        let req = http::Request::post(uri.clone()).header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(BODY.as_bytes()))).unwrap();
        let mut resp = client.request(req).await.unwrap();
        while let Some(f) = resp.body_mut().frame().await {
            if let Ok(d) = f.unwrap().into_data() { total += d.len(); }
        }
    }
    total
}

async fn raw_loop(addr: String, n: usize) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let req = request(&addr);
    let mut buf = vec![0u8; 16384];
    let mut total = 0;
    for _ in 0..n {
        s.write_all(&req).await.unwrap();
        let mut tail = Vec::new();
        loop {
            let k = s.read(&mut buf).await.unwrap();
            assert!(k > 0);
            total += k;
            tail.extend_from_slice(&buf[..k]);
            if ends(&tail) { break; }
            if tail.len() > 16 { tail.drain(..tail.len() - 16); }
        }
    }
    total
}

fn std_loop(addr: String, n: usize) -> usize {
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_nodelay(true).unwrap();
    let req = request(&addr);
    let mut buf = vec![0u8; 16384];
    let mut total = 0;
    for _ in 0..n {
        s.write_all(&req).unwrap();
        let mut tail = Vec::new();
        loop {
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0);
            total += k;
            tail.extend_from_slice(&buf[..k]);
            if ends(&tail) { break; }
            if tail.len() > 16 { tail.drain(..tail.len() - 16); }
        }
    }
    total
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (mode, n, addr) = (a[1].as_str(), a[2].parse().unwrap(), a[3].clone());
    let total = match mode {
        "hyper-mt" => tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(hyper_loop(addr, n)),
        "hyper-ct" => tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(hyper_loop(addr, n)),
        "raw-ct" => tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(raw_loop(addr, n)),
        "std" => std_loop(addr, n),
        _ => panic!("mode"),
    };
    println!("{total}");
}
