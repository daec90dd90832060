//! A TCP proxy on 127.0.0.1 in front of one server, whose connections can be cut: the network
//! failure one instance sees while the others keep theirs.

use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards a local port to `upstream` until [`cut`](Self::cut).
#[derive(Debug)]
pub(crate) struct CutProxy {
    port: u16,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl CutProxy {
    /// Listens on a free port and forwards to `upstream` (`host:port`).
    pub(crate) async fn start(upstream: &str) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let upstream = upstream.to_owned();
        let registry = Arc::clone(&tasks);
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let forward = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                registry.lock().unwrap().push(forward);
            }
        });
        tasks.lock().unwrap().push(accept);
        CutProxy { port, tasks }
    }

    /// The proxied URL of `url`'s server (`redis://127.0.0.1:<proxy port>`).
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Closes every connection and refuses new ones (the client sees resets).
    pub(crate) fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.cut();
    }
}
