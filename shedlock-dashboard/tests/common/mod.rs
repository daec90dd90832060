//! What the dashboard's HTTP tests share: requests sent to the router in process, addressed to
//! the host the dashboard allows by default.

#![allow(dead_code)] // each test binary uses a different part

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use tower::ServiceExt;

/// The host the requests of these tests are addressed to, and the origin of their forms.
pub(crate) const HOST: &str = "127.0.0.1:8080";
pub(crate) const ORIGIN: &str = "http://127.0.0.1:8080";

/// Sends `request` to `app`: the status and the body as text.
pub(crate) async fn call(app: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// `GET uri` addressed to [`HOST`].
pub(crate) async fn get(app: &Router, uri: &str) -> (StatusCode, String) {
    let request = Request::get(uri).header(header::HOST, HOST);
    call(app, request.body(Body::empty()).unwrap()).await
}
