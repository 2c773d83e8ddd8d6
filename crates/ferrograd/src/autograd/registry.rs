//! Overrides of builtin grad rules, registered by op name (MegEngine's grad rule registry).
//! An override may decline for a particular call, and the builtin rule is used.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::GradRule;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::tensor::Tensor;

/// Builds a rule for one recorded call of a builtin op, or declines with `Ok(None)`.
pub trait RuleOverride: Send + Sync {
    fn make(
        &self,
        op: &Op,
        inputs: &[&Tensor],
        outputs: &[Tensor],
        needs: &[bool],
        level: u64,
    ) -> Result<Option<Box<dyn GradRule>>>;
}

type Registry = HashMap<String, Arc<dyn RuleOverride>>;

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);
static ANY: AtomicBool = AtomicBool::new(false);

/// Registers `rule` for every op named `op_name` (see [`Op::names`]), replacing any earlier one.
pub fn register_rule(op_name: &str, rule: Arc<dyn RuleOverride>) -> Result<()> {
    let names = Op::names();
    if !names.contains(&op_name) {
        return Err(Error::invalid(
            "register_grad_rule",
            format!("unknown op {op_name:?}; known ops: {}", names.join(", ")),
        ));
    }
    let mut reg = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    reg.get_or_insert_with(HashMap::new)
        .insert(op_name.to_string(), rule);
    ANY.store(true, Ordering::Release);
    Ok(())
}

/// Removes the override for `op_name`; returns whether there was one.
pub fn unregister_rule(op_name: &str) -> bool {
    let mut reg = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let removed = reg
        .as_mut()
        .map(|r| r.remove(op_name).is_some())
        .unwrap_or(false);
    ANY.store(
        reg.as_ref().is_some_and(|r| !r.is_empty()),
        Ordering::Release,
    );
    removed
}

pub(crate) fn lookup(op_name: &str) -> Option<Arc<dyn RuleOverride>> {
    if !ANY.load(Ordering::Acquire) {
        return None;
    }
    REGISTRY
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()?
        .get(op_name)
        .cloned()
}
