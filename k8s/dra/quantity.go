package dra

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var quantitySuffixes = []struct {
	suffix string
	mult   int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
}

// parseQuantity parses a Kubernetes quantity of bytes as the API server
// writes it ("4Gi", "4294967296", "1536Mi", "1.5G"); fractions of a byte
// round up, as the API server rounds consumed capacity.
func parseQuantity(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, q := range quantitySuffixes {
		if strings.HasSuffix(s, q.suffix) {
			num, mult = strings.TrimSuffix(s, q.suffix), q.mult
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "+-eE") {
		return 0, fmt.Errorf("quantity %q: %w", s, ErrBadRequest)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("quantity %q: %w", s, ErrBadRequest)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("quantity %q: %w", s, ErrBadRequest)
	}
	return int64(math.Ceil(f * float64(mult))), nil
}
