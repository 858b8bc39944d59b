package sim

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/wsched/wsched/placement"
)

// Job is one line of a workload: a transcription that arrives at Arrival
// seconds after the start with AudioSeconds of audio.
type Job struct {
	Arrival      float64            `json:"arrival"`
	AudioSeconds float64            `json:"audio_seconds"`
	Model        string             `json:"model"`
	Priority     placement.Priority `json:"-"`
	UID          int                `json:"uid"`
}

// jobLine is Job as JSON Lines carry it: priority "high", "normal", "low"
// or a number (1, 0, -1).
type jobLine struct {
	Arrival      *float64        `json:"arrival"`
	AudioSeconds *float64        `json:"audio_seconds"`
	Model        string          `json:"model"`
	Priority     json.RawMessage `json:"priority"`
	UID          int             `json:"uid"`
}

// maxWorkloadJobs bounds a workload file.
const maxWorkloadJobs = 1_000_000

// ReadWorkload parses JSON Lines (blank lines and lines starting with #
// are skipped) and returns the jobs in arrival order.
func ReadWorkload(r io.Reader) ([]Job, error) {
	var out []Job
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		j, err := parseLine([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("workload line %d: %w", n, err)
		}
		if len(out) == maxWorkloadJobs {
			return nil, fmt.Errorf("workload: more than %d jobs", maxWorkloadJobs)
		}
		out = append(out, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read workload: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("workload: no jobs")
	}
	slices.SortStableFunc(out, func(a, b Job) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return out, nil
}

func parseLine(b []byte) (Job, error) {
	var l jobLine
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Job{}, err
	}
	switch {
	case l.Arrival == nil || !finite(*l.Arrival) || *l.Arrival < 0 || *l.Arrival > 1e9:
		return Job{}, fmt.Errorf("arrival: want seconds from 0 to 1e9")
	case l.AudioSeconds == nil || !finite(*l.AudioSeconds) || *l.AudioSeconds <= 0 || *l.AudioSeconds > 1e6:
		return Job{}, fmt.Errorf("audio_seconds: want above 0 and at most 1e6")
	case l.Model == "":
		return Job{}, fmt.Errorf("model: missing")
	}
	p, err := parsePriority(l.Priority)
	if err != nil {
		return Job{}, err
	}
	return Job{Arrival: *l.Arrival, AudioSeconds: *l.AudioSeconds, Model: l.Model, Priority: p, UID: l.UID}, nil
}

func parsePriority(raw json.RawMessage) (placement.Priority, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return placement.Normal, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		p, err := placement.ParsePriority(s)
		if err != nil {
			return 0, fmt.Errorf("priority: %w", err)
		}
		return p, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < -1 || n > 1 {
		return 0, fmt.Errorf("priority: want high, normal, low or 1, 0, -1")
	}
	return placement.Priority(n), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// MixedSpec describes the built-in mixed workload.
type MixedSpec struct {
	Jobs  int
	Model string
	// Load is the arrival rate as a fraction of capacity (0.8).
	Load float64
	// Capacity is the jobs per second the machine completes at full use.
	Capacity float64
	Seed     uint64
}

// Mixed clip and file lengths.
const (
	clipMin, clipMax = 3.0, 15.0
	fileMin, fileMax = 300.0, 900.0
	fileShare        = 0.10
)

// MeanMixedAudio is the mean audio length of the mixed workload.
func MeanMixedAudio() float64 {
	return (1-fileShare)*(clipMin+clipMax)/2 + fileShare*(fileMin+fileMax)/2
}

// Mixed generates the built-in workload: 90 % clips of 3–15 s and 10 %
// files of 5–15 min, uniform in length, Poisson arrivals at Load ×
// Capacity jobs per second, all of one model and normal priority.
func Mixed(s MixedSpec) []Job {
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed26))
	rate := s.Load * s.Capacity
	out := make([]Job, 0, s.Jobs)
	t := 0.0
	for range s.Jobs {
		t += rng.ExpFloat64() / rate
		audio := clipMin + rng.Float64()*(clipMax-clipMin)
		if rng.Float64() < fileShare {
			audio = fileMin + rng.Float64()*(fileMax-fileMin)
		}
		out = append(out, Job{Arrival: t, AudioSeconds: audio, Model: s.Model, UID: 1000 + rng.IntN(8)})
	}
	return out
}
