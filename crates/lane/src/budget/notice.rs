//! What a budget says when a cost crosses one of its thresholds: an `attention.requested
//! {kind: "other", respond_via: ["oob"]}` notice naming the budget, its limit, the cost reached
//! and what was done about it (`data.budget`), with its `auto` resolution in the same write
//! (nothing waits on it: AEP-0002 §7.2 wants every request resolved before its session ends).
//! Pure: the Events are planned here, [`super::watch`] decides when and appends them.

use super::account::{Applied, Crossing, Level, CURRENCY};
use crate::views::numbers::figure;
use aep_core::types::{ATTENTION_REQUESTED, ATTENTION_RESOLVED};
use aep_core::{Capture, Severity};
use cline_hooks::{Link as Linked, Mapped, Planned};
use serde_json::{json, Map, Value};

/// What was done about a crossing.
#[derive(Debug, Clone, Copy)]
pub(super) enum Act {
    Notice,
    Cancel,
    NotCancelled(&'static str),
    /// A run without the hub: its next step (this tool call) is stopped at the hook.
    StoppedAtHook,
}

pub(super) fn amounts(c: &Crossing) -> String {
    format!("{} of {} {CURRENCY}", figure(c.cost), figure(c.limit))
}

/// `data.budget`: which budget, its limit, the cost reached, and what was done.
pub(super) fn budget_data(c: &Crossing, applied: &Applied<'_>, act: Act) -> Map<String, Value> {
    let mut budget = json!({
        "name": c.scope.as_str(),
        "limit": c.limit,
        "cost": c.cost,
        "currency": CURRENCY,
        "threshold": c.level.share(),
    });
    if let Some(w) = applied.workspace {
        budget["workspace"] = json!(w);
    }
    match act {
        Act::Notice => {}
        Act::Cancel => budget["action"] = json!("cancel"),
        Act::StoppedAtHook => budget["action"] = json!("stop"),
        Act::NotCancelled(why) => {
            budget["action"] = json!("notice");
            budget["not_cancelled"] = json!(why);
        }
    }
    let mut data = Map::new();
    data.insert("budget".into(), budget);
    data
}

/// The notice for a crossing, and its `auto` resolution.
pub(super) fn notice(c: &Crossing, applied: &Applied<'_>, act: Act, run: Option<&str>, level: Capture) -> [Planned; 2] {
    let what = match (c.level, act) {
        (Level::Warning, _) => format!(
            "{}% of the {} budget used",
            (c.level.share() * 100.0) as u32,
            c.scope.as_str()
        ),
        (Level::Reached, Act::Cancel) => format!("the {} budget is reached: cancelling the run", c.scope.as_str()),
        (Level::Reached, Act::NotCancelled(why)) => format!("the {} budget is reached, {why}", c.scope.as_str()),
        (Level::Reached, Act::Notice) => format!("the {} budget is reached", c.scope.as_str()),
        (Level::Reached, Act::StoppedAtHook) => format!(
            "the {} budget is reached: the run's next step is stopped",
            c.scope.as_str()
        ),
    };
    let mut data = budget_data(c, applied, act);
    data.insert("kind".into(), json!("other"));
    // Structural only (numbers and fixed words): allowed at capture `metadata` (AEP-0003 §9.2).
    data.insert("prompt".into(), json!(format!("{what} ({})", amounts(c))));
    data.insert("respond_via".into(), json!(["oob"]));
    let id = aep_core::id::new_id();
    let on = level > Capture::None;
    let requested = Planned {
        id: id.clone(),
        run: run.map(str::to_string),
        cause: None,
        agent: None,
        event: Mapped {
            ty: ATTENTION_REQUESTED.into(),
            subject: Some("budget".into()),
            step: None,
            severity: Some(match c.level {
                Level::Warning => Severity::Notice,
                Level::Reached => Severity::Warning,
            }),
            capture: level,
            data: on.then_some(data),
            link: Linked::None,
        },
    };
    let resolved = Planned {
        id: aep_core::id::new_id(),
        run: run.map(str::to_string),
        cause: Some(id.clone()),
        agent: None,
        event: Mapped {
            ty: ATTENTION_RESOLVED.into(),
            subject: Some(id),
            step: None,
            severity: None,
            capture: level,
            data: on.then(|| Map::from_iter([("resolution".to_string(), json!("auto"))])),
            link: Linked::None,
        },
    };
    [requested, resolved]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::account::{Limits, Scope};

    /// A crossing is told with a request that asks nobody and its `auto` resolution, caused by
    /// it; what was not done says why, in the budget's data.
    #[test]
    fn a_notice_asks_nobody_and_is_resolved_in_the_same_write() {
        let reached = Crossing {
            scope: Scope::Day,
            level: Level::Reached,
            limit: 2.0,
            cost: 2.05,
        };
        let applied = Applied {
            limits: Limits::default(),
            day: None,
            workspace: Some("/w/**"),
        };
        let why = "not cancelled: the hub tap is off";
        let [requested, resolved] = notice(
            &reached,
            &applied,
            Act::NotCancelled(why),
            Some("R1"),
            Capture::Metadata,
        );
        let data = requested.event.data.as_ref().unwrap();
        assert_eq!(data["respond_via"], json!(["oob"]));
        assert_eq!(
            data["prompt"],
            "the day budget is reached, not cancelled: the hub tap is off (2.05 of 2.00 USD)"
        );
        assert_eq!(data["budget"]["action"], "notice");
        assert_eq!(data["budget"]["not_cancelled"], why);
        assert_eq!(data["budget"]["workspace"], "/w/**");
        assert_eq!(requested.event.severity, Some(Severity::Warning));
        assert_eq!(resolved.cause.as_deref(), Some(requested.id.as_str()));
        assert_eq!(resolved.event.subject.as_deref(), Some(requested.id.as_str()));
        assert_eq!(resolved.event.data.as_ref().unwrap()["resolution"], "auto");
        // At capture `none` the Events carry no data at all.
        let [quiet, _] = notice(&reached, &applied, Act::Notice, None, Capture::None);
        assert!(quiet.event.data.is_none());
    }
}
