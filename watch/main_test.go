package watch

import (
	"os"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
)

// TestMain keeps the tests' folders under one of the binary's own (internal/testmain).
func TestMain(m *testing.M) { os.Exit(testmain.Run(m)) }
