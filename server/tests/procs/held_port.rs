//! A port a test needs to name before the process that will serve it runs (a node's info server the server is
//! pointed at before the node starts). Probing a free port, dropping it and having the process bind it later races
//! with every other process on the machine; here the test binds `127.0.0.1:0` and never lets go: until `forward_to`
//! names the real server, each connection is closed at once (as a refused connection fails a client), and after,
//! each one is piped to the real server's address.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct HeldPort {
    /// `127.0.0.1:PORT`, held for the rest of the test process.
    pub addr: String,
    to: Arc<Mutex<Option<String>>>,
}

impl HeldPort {
    pub fn bind() -> HeldPort {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap().to_string();
        let to = Arc::new(Mutex::new(None::<String>));
        let target = to.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Some(to) = target.lock().unwrap().clone() else { continue }; // dropped: closed
                if let Ok(server) = TcpStream::connect(&to) {
                    pipe(client, server);
                }
            }
        });
        HeldPort { addr, to }
    }

    /// From now on, connections reach `addr` (`HOST:PORT`).
    pub fn forward_to(&self, addr: &str) {
        *self.to.lock().unwrap() = Some(addr.to_string());
    }
}

/// Copies both ways until each side closes.
fn pipe(a: TcpStream, b: TcpStream) {
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    let one_way = |from: TcpStream, to: TcpStream| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut &from, &mut &to);
            let _ = to.shutdown(Shutdown::Write);
        });
    };
    one_way(a, b);
    one_way(b2, a2);
}
