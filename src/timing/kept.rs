//! `timing.timed_output_check`: the output of one of a round's timed candidate calls, chosen here
//! after the round with randomness no worker holds, read by the reference worker from the pool
//! the candidate copies every timed call's output into (`kbench_worker/timing/kept.py`), and compared
//! with the reference's on the inputs derived here for that call. No request reaches the
//! candidate between its last block and the read, so it cannot make good afterwards a call that
//! did no work; which call is read it cannot know, so every call must have left a right output.

use std::time::Instant;

use rand::Rng;
use serde_json::Value;

use super::arms::ArmId;
use super::replies::Warmed;
use super::session::{Failed, Session};
use crate::record::{Check, Outcome};
use crate::verdict::{Cause, ReferenceStep};
use crate::worker::request::CheckKept;
use crate::worker::{derive_seed, CheckName, ErrorKind, Link, Reply};

const NAME: CheckName = CheckName::TimingTimedOutputCheck;

/// The candidate's pool of timed outputs, as its warm-up described it.
pub(super) struct Pool {
    description: Value,
    pub(super) slots: u32,
}

impl Pool {
    /// The pool the candidate's warm-up reply describes; a worker that describes none keeps
    /// kbench from checking its timed calls, and that is the candidate's doing.
    pub(super) fn of(warmed: &Warmed) -> Result<Pool, Failed> {
        let description = warmed.kept.clone().unwrap_or(Value::Null);
        match description.get("slots").and_then(Value::as_u64) {
            Some(slots @ 1..=0xFFFF) => Ok(Pool {
                description,
                slots: slots as u32,
            }),
            _ => Err(Cause::TimedOutputWrong(format!(
                "{NAME}: the candidate's worker kept no timed outputs to check"
            ))),
        }
    }
}

/// One of the candidate's blocks in a round: its seed, the slot of its first draw, and how many
/// draws' outputs it kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct KeptBlock {
    pub(super) seed: u64,
    pub(super) keep: u32,
    pub(super) draws: u32,
}

/// A call chosen for the check: its place among the round's calls, its slot and its input seed.
#[derive(Debug, PartialEq)]
struct Chosen {
    call: u32,
    calls: u32,
    slot: u32,
    seed: u64,
}

/// Uniform over the round's calls still in the pool: all of them, or the last `slots` when the
/// round made more calls than the pool holds (it wraps).
fn choose(blocks: &[KeptBlock], slots: u32, rng: &mut impl Rng) -> Option<Chosen> {
    let calls = blocks.iter().map(|b| b.keep + b.draws).max()?;
    let first = calls.saturating_sub(slots);
    if calls == first {
        return None;
    }
    let call = rng.gen_range(first..calls);
    let block = blocks
        .iter()
        .find(|b| (b.keep..b.keep + b.draws).contains(&call))?;
    Some(Chosen {
        call,
        calls,
        slot: call % slots,
        seed: derive_seed(block.seed, u64::from(call - block.keep)),
    })
}

impl<L: Link> Session<'_, L> {
    /// Check one call of the round whose candidate blocks were `blocks`.
    pub(super) fn check_kept(
        &mut self,
        pool: &Pool,
        blocks: &[KeptBlock],
        round: u32,
        rng: &mut impl Rng,
    ) -> Result<Check, Failed> {
        let started = Instant::now();
        let check = |outcome, evidence| Check {
            name: NAME,
            outcome,
            evidence,
            seconds: started.elapsed().as_secs_f64(),
            runs: 1,
        };
        let Some(chosen) = choose(blocks, pool.slots, rng) else {
            return Ok(check(Outcome::Skip, "no timed call kept".into()));
        };
        let held = if chosen.calls > pool.slots {
            format!(" (the pool held the last {})", pool.slots)
        } else {
            String::new()
        };
        let call = format!(
            "round {round}, timed call {} of {}{held}",
            chosen.call + 1,
            chosen.calls
        );
        let request = CheckKept {
            slot: chosen.slot,
            seed: chosen.seed,
            forward_seed: derive_seed(chosen.seed, 0),
            kept: pool.description.clone(),
        };
        let differs = |why: &str| Cause::TimedOutputWrong(format!("{NAME}: {call}: {why}"));
        match self.alone(ArmId::Eager, request, self.config.timeouts.call) {
            Ok(Reply::Ok(v)) if v.correct => Ok(check(Outcome::Pass, format!("{call}: correct"))),
            Ok(Reply::Ok(v)) if v.uncheckable => Ok(check(
                Outcome::Skip,
                format!("{call}: the reference's output is not finite"),
            )),
            Ok(Reply::Ok(v)) => Err(differs(v.reason.as_deref().unwrap_or("wrong output"))),
            Ok(Reply::Err(e)) if e.kind == ErrorKind::Output => Err(differs(&e.message)),
            Ok(Reply::Err(e)) => Err(Cause::ReferenceError(ReferenceStep::Check, e)),
            Err(f) => Err(Cause::ReferenceDied(f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn block(seed: u64, keep: u32, draws: u32) -> KeptBlock {
        KeptBlock { seed, keep, draws }
    }

    #[test]
    fn every_call_of_a_round_can_be_chosen_with_its_own_seed_and_slot() {
        let blocks = [block(11, 0, 3), block(22, 3, 3)];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let c = choose(&blocks, 640, &mut rng).unwrap();
            let (seed, j) = if c.call < 3 {
                (11, c.call)
            } else {
                (22, c.call - 3)
            };
            assert_eq!(c.seed, derive_seed(seed, u64::from(j)));
            assert_eq!((c.slot, c.calls), (c.call, 6));
            seen.insert(c.call);
        }
        assert_eq!(seen.len(), 6, "{seen:?}");
    }

    #[test]
    fn a_pool_smaller_than_the_round_offers_only_the_calls_it_still_holds() {
        let blocks = [block(11, 0, 4), block(22, 4, 4)];
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..100 {
            let c = choose(&blocks, 3, &mut rng).unwrap();
            assert!((5..8).contains(&c.call), "{c:?}");
            assert_eq!(c.slot, c.call % 3);
        }
        assert_eq!(choose(&[], 3, &mut rng), None);
    }

    #[test]
    fn a_warm_up_without_a_pool_is_the_candidates_doing() {
        let warmed = |kept| Warmed {
            kept,
            ..Warmed::default()
        };
        assert_eq!(
            Pool::of(&warmed(Some(serde_json::json!({"slots": 8}))))
                .unwrap()
                .slots,
            8
        );
        for kept in [
            None,
            Some(serde_json::json!({"slots": 0})),
            Some(serde_json::json!({})),
        ] {
            match Pool::of(&warmed(kept)) {
                Err(Cause::TimedOutputWrong(why)) => assert!(why.contains(NAME.as_str()), "{why}"),
                _ => panic!("accepted"),
            }
        }
    }
}
