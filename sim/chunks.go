package sim

import (
	"fmt"
	"time"

	"github.com/wsched/wsched/jobs/chunk"
)

// split replaces each job longer than over by its windows (jobs/chunk's
// plan: 30 s windows), each a job of the same arrival, model, priority and
// uid; parent maps a window to its job.
func split(work []Job, over time.Duration) ([]Job, []int, error) {
	var out []Job
	var parent []int
	for i, j := range work {
		ws, err := chunk.Plan(seconds(j.AudioSeconds), over, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("sim: job %d: %w", i, err)
		}
		for _, w := range ws {
			part := j
			part.AudioSeconds = w.Len().Seconds()
			out, parent = append(out, part), append(parent, i)
		}
	}
	return out, parent, nil
}

// byJob folds the windows' records into one per job of orig: the first
// start and the last finish.
func byJob(orig []Job, parent []int, recs []record) []record {
	out := make([]record, len(orig))
	seen := make([]bool, len(orig))
	for i, r := range recs {
		p := parent[i]
		if !seen[p] {
			out[p], seen[p] = r, true
			continue
		}
		out[p].start, out[p].finish = min(out[p].start, r.start), max(out[p].finish, r.finish)
	}
	return out
}
