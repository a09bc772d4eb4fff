//! How the shared HTTP connector resolves a server's name: as the system does, or, for the pools
//! of tenants' servers, through the network policy (so a name cannot lead to an address the
//! policy refuses). The pools ([`super::plain_http`]) build their connector with it and the
//! connections they hold ([`super::held_connections`]) are opened through that connector.

use std::net::SocketAddr;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use switchboard_oauth::{NetworkPolicy, resolve_guarded};

/// How hyper's connector resolves names: as the system does, or through a policy.
#[derive(Clone)]
pub(crate) enum Dns {
    System(GaiResolver),
    Guarded(NetworkPolicy),
}

impl tower_service::Service<Name> for Dns {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        match self {
            Self::System(system) => {
                let resolving = system.call(name);
                Box::pin(async move { Ok(resolving.await?.collect::<Vec<_>>().into_iter()) })
            }
            Self::Guarded(policy) => {
                let policy = policy.clone();
                Box::pin(async move {
                    Ok(resolve_guarded(&policy, name.as_str(), 0)
                        .await?
                        .into_iter())
                })
            }
        }
    }
}
