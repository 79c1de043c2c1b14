package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ExpireSend stops a retrying send's automatic attempts the way the send
// worker does when the 23-hour confirmation window passes (a test cannot
// wait for it), leaving the send uncertain for an operator to resolve.
// Why under the send's thread lease: the worker is then never
// mid-attempt when the state changes.
func ExpireSend(t testing.TB, inst *Instance, pid string) {
	t.Helper()
	ctx := context.Background()
	st := inst.Store
	pub, err := st.GetPublication(ctx, st.DB, pid)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := st.GetConversation(ctx, st.DB, pub.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "the send's thread lease", func() bool {
		l, _, err := st.TryLease(ctx, st.DB, pub.CompanyID, pub.EndpointID, store.ThreadLeaseKey(conv.ExternalThreadID), "test", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			return false
		}
		defer func() { _ = l.Release(ctx) }()
		if err := st.SetPublicationState(ctx, st.DB, pid, domain.SendUnknown,
			"The send confirmation window has expired. Check AgentMail before resolving this delivery.", nil); err != nil {
			t.Fatal(err)
		}
		return true
	})
}
