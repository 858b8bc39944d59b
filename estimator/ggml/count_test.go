package ggml

import "io"

type countingReader struct {
	io.ReadSeeker
	read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadSeeker.Read(p)
	c.read += int64(n)
	return n, err
}
