package placement

import "sync/atomic"

// board is where the owner loop publishes its state for readers: View reads
// the latest published View without entering the loop, so readers never
// queue behind writers. The loop publishes after every step that changed
// something, before it answers anyone, so a caller sees its own change.
type board struct {
	view atomic.Pointer[View]
	gen  atomic.Uint64 // generation of the published view
}

// markChanged notes that the next publish must rebuild the view.
func (s *state) markChanged() { s.dirty = true }

// answer queues f (a reply to a caller) until the loop has published what
// the current step changed.
func (s *state) answer(f func()) { s.answers = append(s.answers, f) }

// settle ends a step of the owner loop: it publishes the view when something
// changed, then delivers the step's answers.
func (s *state) settle() {
	if s.dirty {
		s.dirty = false
		s.gen++
		v := s.view()
		s.board.view.Store(&v)
		s.board.gen.Store(s.gen)
	}
	answers := s.answers
	s.answers = nil
	for _, f := range answers {
		f()
	}
}

// answerAfterCommit delivers f from the journal goroutine once the change it
// answers for is published: at once when the view of this step (generation
// s.gen+1) is already out, else through the owner loop.
func (s *state) answerAfterCommit() func(f func()) {
	want, b, later := s.gen+1, s.board, s.later
	return func(f func()) {
		if b.gen.Load() >= want {
			f()
			return
		}
		later(func(s *state) { s.answer(f) })
	}
}
