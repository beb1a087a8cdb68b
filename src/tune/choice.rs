//! The rule that turns candidates' timings into a winner, apart from any
//! device so that it can be tested with made-up timings.

/// A candidate must be this much faster than the built-in choice to
/// replace it (a relative time below `1 - NOISE_MARGIN`): runs of the same
/// kernel minutes apart differ by several percent on a loaded machine,
/// and a winner picked by noise would change from run to run.
pub(crate) const NOISE_MARGIN: f64 = 0.05;

/// Each candidate's median time on each tuning shape (`None`: the
/// candidate failed there), the built-in candidate first.
pub(crate) type Timings = Vec<Vec<Option<f64>>>;

/// Each candidate's time relative to the built-in one: the geometric mean
/// over the shapes of its median over the built-in's, so that every shape
/// counts the same whatever its size. `None` where the candidate failed
/// on any shape, or the built-in did (then no ratio is known).
pub(crate) fn relative_times(timings: &Timings) -> Vec<Option<f64>> {
    let Some(base) = timings.first() else {
        return Vec::new();
    };
    timings
        .iter()
        .map(|cand| {
            if cand.is_empty() || cand.len() != base.len() {
                return None;
            }
            let mut log_sum = 0.0;
            for (c, b) in cand.iter().zip(base) {
                match (c, b) {
                    (Some(c), Some(b)) if *c > 0.0 && *b > 0.0 => log_sum += (c / b).ln(),
                    _ => return None,
                }
            }
            Some((log_sum / cand.len() as f64).exp())
        })
        .collect()
}

/// The index of the winner: the fastest candidate whose relative time is
/// below `1 - NOISE_MARGIN`, ties going to the earlier candidate; the
/// built-in (index 0) otherwise, also where every candidate failed.
pub(crate) fn winner(relative: &[Option<f64>]) -> usize {
    let mut best = 0;
    let mut best_time = 1.0 - NOISE_MARGIN;
    for (i, r) in relative.iter().enumerate().skip(1) {
        if let Some(r) = *r
            && r < best_time
        {
            best = i;
            best_time = r;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(t: Timings) -> usize {
        winner(&relative_times(&t))
    }

    #[test]
    fn the_fastest_candidate_wins_by_geometric_mean() {
        // Candidate 2 is twice as fast on the small shape, a bit slower on
        // the large one: the geometric mean (0.74) makes it the winner
        // though its total time is larger.
        let t = vec![
            vec![Some(1e-3), Some(1.0)],
            vec![Some(1e-3), Some(0.9)],
            vec![Some(0.5e-3), Some(1.1)],
        ];
        let r = relative_times(&t);
        assert_eq!(r[0], Some(1.0));
        assert!((r[2].unwrap() - (0.5f64 * 1.1).sqrt()).abs() < 1e-12);
        assert_eq!(pick(t), 2);
    }

    #[test]
    fn noise_keeps_the_built_in_choice() {
        // 3 % faster is within the noise margin; 6 % is not.
        assert_eq!(pick(vec![vec![Some(1.0)], vec![Some(0.97)]]), 0);
        assert_eq!(pick(vec![vec![Some(1.0)], vec![Some(0.94)]]), 1);
        // Slower candidates never win.
        assert_eq!(pick(vec![vec![Some(1.0)], vec![Some(1.5)]]), 0);
    }

    #[test]
    fn ties_go_to_the_earlier_candidate() {
        let t = vec![vec![Some(1.0)], vec![Some(0.5)], vec![Some(0.5)]];
        assert_eq!(pick(t), 1);
    }

    #[test]
    fn a_failed_candidate_is_never_chosen() {
        // Candidate 1 would be fastest on one shape but failed validation
        // on the other.
        let t = vec![
            vec![Some(1.0), Some(1.0)],
            vec![Some(0.1), None],
            vec![Some(0.8), Some(0.8)],
        ];
        let r = relative_times(&t);
        assert_eq!(r[1], None);
        assert_eq!(pick(t), 2);
    }

    #[test]
    fn a_failed_built_in_leaves_no_ratio_and_keeps_it() {
        let t = vec![vec![None], vec![Some(0.5)]];
        assert_eq!(relative_times(&t), vec![None, None]);
        assert_eq!(pick(t), 0);
        assert_eq!(pick(Vec::new()), 0);
    }

    #[test]
    fn timings_that_change_change_the_winner() {
        let mut t = vec![vec![Some(1.0)], vec![Some(0.7)], vec![Some(0.8)]];
        assert_eq!(pick(t.clone()), 1);
        t[2][0] = Some(0.6);
        assert_eq!(pick(t), 2);
    }
}
