package sim

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Trace is a daemon trace (GET /v1/jobs/trace, `wsched jobs --trace`) read
// as a workload: its job lines are workload lines with more keys (what
// happened to the job), which the simulation does not need.
type Trace struct {
	Jobs []Job
	// Skipped are job lines of unknown audio duration (the daemon could
	// read neither the header nor a transcript), not simulated.
	Skipped int
	// LeaseEvents are the trace's lease event lines; Granted the grants
	// among them, and PeakLeasedBytes the most leased at once by them.
	LeaseEvents, Granted int
	PeakLeasedBytes      int64
}

// traceLine is the part of a trace line the reader needs.
type traceLine struct {
	Kind  string `json:"kind"`
	Event string `json:"event"`
	Lease string `json:"lease"`
	Bytes int64  `json:"bytes"`
}

// ReadTrace reads a daemon trace: "job" lines become jobs (keys beyond a
// workload line's are ignored), "lease" lines are counted, the "trace"
// header and blank lines are skipped. A line without kind is a workload
// line, so a workload file reads as a trace too.
func ReadTrace(r io.Reader) (Trace, error) {
	var out Trace
	leased := map[string]int64{}
	var now int64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var tl traceLine
		if err := json.Unmarshal([]byte(line), &tl); err != nil {
			return Trace{}, fmt.Errorf("trace line %d: %w", n, err)
		}
		switch tl.Kind {
		case "trace":
		case "lease":
			out.LeaseEvents++
			now = leaseStep(leased, now, tl)
			out.PeakLeasedBytes = max(out.PeakLeasedBytes, now)
			if tl.Event == "granted" {
				out.Granted++
			}
		case "", "job":
			j, err := parseTraceJob([]byte(line))
			if err != nil {
				if isUnknownDuration(line) {
					out.Skipped++
					continue
				}
				return Trace{}, fmt.Errorf("trace line %d: %w", n, err)
			}
			if len(out.Jobs) == maxWorkloadJobs {
				return Trace{}, fmt.Errorf("trace: more than %d jobs", maxWorkloadJobs)
			}
			out.Jobs = append(out.Jobs, j)
		default:
			return Trace{}, fmt.Errorf("trace line %d: unknown kind %q", n, tl.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("read trace: %w", err)
	}
	if len(out.Jobs) == 0 {
		return Trace{}, fmt.Errorf("trace: no jobs of known duration (%d skipped)", out.Skipped)
	}
	slices.SortStableFunc(out.Jobs, func(a, b Job) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return out, nil
}

// leaseStep applies a lease event to the bytes leased now.
func leaseStep(leased map[string]int64, now int64, tl traceLine) int64 {
	switch tl.Event {
	case "granted", "resized":
		now += tl.Bytes - leased[tl.Lease]
		leased[tl.Lease] = tl.Bytes
	case "released", "expired":
		now -= leased[tl.Lease]
		delete(leased, tl.Lease)
	}
	return now
}

// parseTraceJob is parseLine without the strictness about extra keys.
func parseTraceJob(b []byte) (Job, error) {
	var l jobLine
	if err := json.Unmarshal(b, &l); err != nil {
		return Job{}, err
	}
	strict, err := json.Marshal(l)
	if err != nil {
		return Job{}, err
	}
	return parseLine(strict)
}

// isUnknownDuration reports a job line whose audio_seconds is 0 or absent.
func isUnknownDuration(line string) bool {
	var l struct {
		AudioSeconds *float64 `json:"audio_seconds"`
	}
	return json.Unmarshal([]byte(line), &l) == nil && (l.AudioSeconds == nil || *l.AudioSeconds == 0)
}
