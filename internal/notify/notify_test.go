package notify_test

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/notify"
)

func TestSignalCollapsesAndNeverBlocks(t *testing.T) {
	s := notify.New()
	for range 3 {
		s.Notify()
	}
	<-s
	select {
	case <-s:
		t.Fatal("three notifications before the wait must wake once")
	default:
	}
}
