//! `switchboard tenant ...`, `switchboard user ...` and `switchboard vault ...`: the tenants and
//! users of a daemon that serves many (`serve --users`), the users' API keys, and the keys that
//! seal secrets at rest. They work on the store directly, like
//! `server ...`, so they serve a running daemon too (it looks keys up in the store).

use anyhow::Context;
use switchboard_core::{Role, TenantId, UserId};
use switchboard_store::Store;

use crate::cli::{TenantCommand, UserCommand, VaultCommand};

/// Runs a `tenant` subcommand.
pub async fn tenant_command(store: &Store, command: TenantCommand) -> anyhow::Result<i32> {
    match command {
        TenantCommand::Add { id, name } => {
            let id = TenantId::new(id)?;
            let name = name.unwrap_or_else(|| id.to_string());
            store.add_tenant(&id, &name).await?;
            println!("Added tenant '{id}'. Add its users with `switchboard user add {id}/<user>`.");
        }
        TenantCommand::List(flag) => {
            let tenants = store.tenants().await?;
            if flag.json {
                println!("{}", serde_json::to_string_pretty(&tenants)?);
            } else {
                for tenant in tenants {
                    println!("{}\t{}", tenant.id, tenant.display_name);
                }
            }
        }
        TenantCommand::Remove { id } => {
            let id = TenantId::new(id)?;
            store.remove_tenant(&id).await?;
            println!("Removed tenant '{id}' with its users, servers, tokens and layers.");
        }
    }
    Ok(0)
}

/// Runs a `user` subcommand.
pub async fn user_command(store: &Store, command: UserCommand) -> anyhow::Result<i32> {
    match command {
        UserCommand::Add {
            user,
            admin,
            name,
            identity_provider,
        } => {
            let (tenant, user) = tenant_and_user(&user)?;
            let role = if admin { Role::Admin } else { Role::Member };
            store
                .add_user(&tenant, &user, role, &name, identity_provider)
                .await?;
            println!(
                "Added {} '{tenant}/{user}'. Make their API key with `switchboard user key {tenant}/{user}`.",
                role.as_str()
            );
        }
        UserCommand::Link { user } => {
            let (tenant, user) = tenant_and_user(&user)?;
            store.link_user_to_identity_provider(&tenant, &user).await?;
            println!(
                "Linked '{tenant}/{user}': the identity provider's tokens naming them now reach their workspace."
            );
        }
        UserCommand::List { tenant, json } => {
            let users = store.users(&TenantId::new(tenant)?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&users)?);
            } else {
                for user in users {
                    println!("{}\t{}\t{}", user.id, user.role.as_str(), user.display_name);
                }
            }
        }
        UserCommand::Remove { user } => {
            let (tenant, user) = tenant_and_user(&user)?;
            store.remove_user(&tenant, &user).await?;
            println!("Removed '{tenant}/{user}' with their keys, own servers, tokens and layers.");
        }
        UserCommand::Key { user, name } => {
            let (tenant, user) = tenant_and_user(&user)?;
            let key = store.create_api_key(&tenant, &user, &name).await?;
            // The key alone on stdout, so `KEY=$(switchboard user key ...)` works; the advice on
            // stderr.
            println!("{key}");
            eprintln!(
                "This is the only time the key is shown. It works as `Authorization: Bearer <key>` on a daemon run with `serve --users`; revoke it with `switchboard user revoke-key {tenant}/{user} {name}`."
            );
        }
        UserCommand::Keys { user, json } => {
            let (tenant, user) = tenant_and_user(&user)?;
            let keys = store.api_keys(&tenant, &user).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
            } else {
                for key in keys {
                    println!("{}", key.name);
                }
            }
        }
        UserCommand::RevokeKey { user, name } => {
            let (tenant, user) = tenant_and_user(&user)?;
            store.revoke_api_key(&tenant, &user, &name).await?;
            println!("Revoked the key '{name}' of '{tenant}/{user}'.");
        }
    }
    Ok(0)
}

/// Runs a `vault` subcommand.
pub async fn vault_command(store: &Store, command: VaultCommand) -> anyhow::Result<i32> {
    match command {
        VaultCommand::RotateMaster { new_key_file } => {
            let new = switchboard_store::Vault::load_or_create_file(&new_key_file)
                .with_context(|| format!("the new key in {}", new_key_file.display()))?;
            let resealed = store.rotate_master_key(&new).await?;
            let compacted = store.compact().await?;
            println!(
                "Sealed {resealed} again under their tenants' keys, and wrapped those keys with the new master key in {}; {compacted}.",
                new_key_file.display()
            );
            eprintln!(
                "Every process sharing this store must now use the new key: put it in place of the old vault.key, or in SWITCHBOARD_VAULT_KEY. A process may be started with the new key as SWITCHBOARD_VAULT_KEY and the old one as SWITCHBOARD_VAULT_PREVIOUS_KEY before the rotation, so that it reads the store both before and after."
            );
        }
        VaultCommand::RotateTenant { tenant } => {
            let tenant = TenantId::new(tenant)?;
            let (version, resealed) = store.rotate_tenant_key(&tenant).await?;
            let compacted = store.compact().await?;
            println!(
                "Tenant '{tenant}' has data key version {version}; {resealed} were sealed again with it; {compacted}."
            );
        }
    }
    Ok(0)
}

/// `<tenant>/<user>`, or `<user>` in the default tenant.
fn tenant_and_user(text: &str) -> anyhow::Result<(TenantId, UserId)> {
    let (tenant, user) = match text.split_once('/') {
        Some((tenant, user)) => (TenantId::new(tenant)?, user),
        None => (TenantId::default_tenant(), text),
    };
    let user = UserId::new(user).with_context(|| format!("in '{text}'"))?;
    Ok((tenant, user))
}
