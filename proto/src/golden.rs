//! The four frozen vectors `verify --self-test` recomputes. Their inputs are built here in code
//! (not read from a file) so a drift in the model or the hash shows up as a moved id.

use crate::id::tick_id;
use crate::model::{Check, Ground, Liveness};

const SHA: &str = "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901";
const CASE_DECISION: &str = "restore-safety counter DB-backed; reject Redis";
const CASE_OBSERVE: &str = "multi-pod restore-safety counter — chat-room R2289→R2290";
const CASE_PARENT: &str = "7b21f0a4c8de";

/// One self-test line: the vector's name, the id computed now, the frozen id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorResult {
    pub name: &'static str,
    pub got: String,
    pub want: &'static str,
}

impl VectorResult {
    pub fn pass(&self) -> bool {
        self.got == self.want
    }
}

fn chosen(claim: &str, check: Option<Check>) -> Ground {
    Ground {
        claim: claim.into(),
        supports: "chosen".into(),
        check,
    }
}

fn person(r: &str) -> Option<Check> {
    Some(Check::Person {
        reference: r.into(),
    })
}

fn redis_liveness() -> Liveness {
    Liveness {
        platforms: vec!["linux-ci".into()],
        triggered_by: vec!["pyproject.toml".into()],
        surfaces: vec!["pyproject-deps".into()],
    }
}

fn test_check(reference: &str, counter: Option<&str>) -> Option<Check> {
    Some(Check::Test {
        reference: reference.into(),
        verified_at_sha: SHA.into(),
        counter_test: counter.map(str::to_string),
        liveness: redis_liveness(),
    })
}

fn case_grounds(counter: Option<&str>, tripwire: bool) -> Vec<Ground> {
    let redis_road = Ground {
        claim: "Redis would add a new infra dependency".into(),
        supports: "rejected:Redis".into(),
        check: if tripwire {
            test_check(
                "! grep -q redis pyproject.toml",
                Some("grep -q redis pyproject.toml"),
            )
        } else {
            None
        },
    };
    vec![
        chosen(
            "Argus introduces no Redis; multi-pod coord via existing DB",
            test_check("pytest tests/test_redis_absent.py", counter),
        ),
        chosen(
            "team still wants 0-Redis posture",
            person("Q3 infra review"),
        ),
        redis_road,
    ]
}

const COUNTER: &str = "pytest tests/test_redis_absent.py::test_redis_injection_flips_red";

/// Recompute the four frozen vectors.
pub fn self_test() -> Vec<VectorResult> {
    let genesis = vec![
        chosen(
            "team still wants a frozen schema",
            person("Q3 infra review"),
        ),
        Ground {
            claim: "pgvector would lock our schema".into(),
            supports: "rejected:pgvector".into(),
            check: None,
        },
    ];
    let case = |g: Vec<Ground>| tick_id(CASE_DECISION, CASE_OBSERVE, &g, CASE_PARENT);
    vec![
        VectorResult {
            name: "genesis",
            got: tick_id(
                "freeze the retrieval schema for v2",
                "evaluating retrieval backend",
                &genesis,
                "",
            ),
            want: "e2b337f53a1f",
        },
        VectorResult {
            name: "case1",
            got: case(case_grounds(Some(COUNTER), false)),
            want: "638c47b0c9dd",
        },
        VectorResult {
            name: "harvested",
            got: case(case_grounds(None, false)),
            want: "0cf784b51331",
        },
        VectorResult {
            name: "rejected_tripwire",
            got: case(case_grounds(Some(COUNTER), true)),
            want: "9c5feb4582ac",
        },
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_frozen_vector_reproduces() {
        for v in super::self_test() {
            assert!(v.pass(), "{} moved: got {} want {}", v.name, v.got, v.want);
        }
    }
}
