package sherpa

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	so "github.com/k2-fsa/sherpa-onnx-go-linux"

	"github.com/wsched/wsched/plugins/internal/audio"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
)

// DefaultBatchWindow is how long the batcher waits, after a piece arrives,
// for the pieces of the other calls in flight before it decodes what it has.
const DefaultBatchWindow = 20 * time.Millisecond

// batcher owns a recognizer's decoding: one goroutine collects the pieces
// concurrent Transcribe calls submit and decodes them together with
// DecodeStreams, one ONNX Runtime run for the batch (issue 26: several
// streams decoded in one call). It decodes at once when every call in
// flight has a piece waiting, or when the batch holds max pieces, else when
// window has passed since the first piece.
type batcher struct {
	rec    *so.OfflineRecognizer
	batch  bool // the model kind decodes a batch in one run (SenseVoice, Paraformer)
	max    int
	window time.Duration

	jobs   chan *decodeJob
	active atomic.Int64  // calls in flight, which may submit pieces
	left   chan struct{} // a call left: a batch may be complete now
	quit   chan struct{}
	done   chan struct{}

	mu    sync.Mutex
	stats batchStats
}

// batchStats count what the batcher did.
type batchStats struct {
	Runs    int // DecodeStreams (or Decode) calls
	Pieces  int // pieces decoded
	Largest int // most pieces in one run
}

// decodeJob is one piece waiting for its recognition.
type decodeJob struct {
	samples []float32
	out     chan recognition // buffered 1
}

func newBatcher(rec *so.OfflineRecognizer, kind modeldir.Kind, limit int, window time.Duration) *batcher {
	bt := &batcher{rec: rec, batch: kind != modeldir.Whisper, max: max(limit, 1), window: window,
		jobs: make(chan *decodeJob), left: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go bt.run()
	return bt
}

// stop ends the goroutine; no call may be in flight. A nil batcher is
// stopped already.
func (bt *batcher) stop() {
	if bt == nil {
		return
	}
	close(bt.quit)
	<-bt.done
}

// join counts a call in flight until leave.
func (bt *batcher) join() { bt.active.Add(1) }
func (bt *batcher) leave() {
	bt.active.Add(-1)
	select {
	case bt.left <- struct{}{}:
	default:
	}
}

// recognize decodes samples in the next batch; ctx ends the wait for a
// place in it (a piece already taken is decoded all the same).
func (bt *batcher) recognize(ctx context.Context, samples []float32) (recognition, error) {
	j := &decodeJob{samples: samples, out: make(chan recognition, 1)}
	select {
	case bt.jobs <- j:
	case <-ctx.Done():
		return recognition{}, ctx.Err()
	}
	return <-j.out, nil
}

func (bt *batcher) run() {
	defer close(bt.done)
	for {
		var first *decodeJob
		select {
		case first = <-bt.jobs:
		case <-bt.quit:
			return
		}
		bt.decode(bt.collect(first))
	}
}

// collect gathers pieces after first until every call in flight has one
// in, max are in, or the window has passed.
func (bt *batcher) collect(first *decodeJob) []*decodeJob {
	jobs := []*decodeJob{first}
	timer := time.NewTimer(bt.window)
	defer timer.Stop()
	for len(jobs) < bt.max && int64(len(jobs)) < bt.active.Load() {
		select {
		case j := <-bt.jobs:
			jobs = append(jobs, j)
		case <-bt.left:
		case <-timer.C:
			return jobs
		}
	}
	return jobs
}

// decode runs the recognizer on jobs: one DecodeStreams for a kind that
// batches, one Decode each otherwise (sherpa-onnx's Whisper decodes
// stream by stream anyway).
func (bt *batcher) decode(jobs []*decodeJob) {
	streams := make([]*so.OfflineStream, len(jobs))
	for i, j := range jobs {
		streams[i] = so.NewOfflineStream(bt.rec)
		streams[i].AcceptWaveform(audio.SampleRate, j.samples)
	}
	runs := 1
	if bt.batch || len(streams) == 1 {
		bt.rec.DecodeStreams(streams)
	} else {
		runs = len(streams)
		for _, s := range streams {
			bt.rec.Decode(s)
		}
	}
	bt.mu.Lock() // counted before any caller has its result
	bt.stats.Runs += runs
	bt.stats.Pieces += len(jobs)
	bt.stats.Largest = max(bt.stats.Largest, len(jobs))
	bt.mu.Unlock()
	for i, j := range jobs {
		var r recognition
		if res := streams[i].GetResult(); res != nil {
			r = recognition{text: res.Text, lang: res.Lang}
		}
		so.DeleteOfflineStream(streams[i])
		j.out <- r
	}
}

// statsNow returns the counts so far.
func (bt *batcher) statsNow() batchStats {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.stats
}
