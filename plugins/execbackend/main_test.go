package execbackend

import (
	"os"
	"testing"

	"github.com/wsched/wsched/internal/testtmp"
)

func TestMain(m *testing.M) { os.Exit(testtmp.Main(m)) }
