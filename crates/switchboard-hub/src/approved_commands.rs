//! The operator's approved commands (the stdio servers tenants and members may run), read and
//! changed through the hub: only the operator's workspace may change them (the store refuses
//! anyone else's), and [`Hub::admit`] reads them again for every server it admits.

use switchboard_core::ApprovedCommand;
use switchboard_store::StoreError;

use crate::Hub;

impl Hub {
    /// Every approved command, as stored (the operator's own values included: redact before
    /// showing them to anyone else).
    pub async fn approved_commands(&self) -> Result<Vec<ApprovedCommand>, StoreError> {
        self.store.approved_commands().await
    }

    /// Approves `command`, replacing one of its name (the operator only).
    pub async fn approve_command(&self, command: &ApprovedCommand) -> Result<(), StoreError> {
        self.store.put_approved_command(command).await
    }

    /// Withdraws the command `name` (the operator only); whether there was one.
    pub async fn withdraw_command(&self, name: &str) -> Result<bool, StoreError> {
        self.store.remove_approved_command(name).await
    }
}
