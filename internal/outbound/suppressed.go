package outbound

import (
	"strings"

	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// A send to a suppressed recipient is recorded as failed at once and never
// sent (docs/email-setup.md, "Suppressed recipients"). Its error
// names each suppressed address, why and since when; its summary carries
// errorCode recipient_suppressed and, in errorDetails, the path of the
// company's suppression list, where an owner or admin lifts one.
const (
	// CodeRecipientSuppressed is the errorCode of such a send.
	CodeRecipientSuppressed = "recipient_suppressed"
	// suppressedPrefix starts its stored error (summarizeSend knows it by
	// that).
	suppressedPrefix = "Not sent: suppressed recipient"
	// legacySuppressedMsg is the error such sends were stored with before.
	legacySuppressedMsg = "A recipient previously bounced permanently or complained; this email was not sent"
)

// suppressedError is the stored error of a send to the suppressed
// recipients sup.
func suppressedError(sup []store.Suppression) string {
	parts := make([]string, 0, len(sup))
	for _, v := range sup {
		parts = append(parts, v.Address+" ("+email.SuppressionReason(v.Reason)+", suppressed since "+v.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")+")")
	}
	return suppressedPrefix + ": " + strings.Join(parts, "; ") +
		". Mail to a suppressed address is never sent; an owner or admin can lift the suppression in the company's suppressed recipients list."
}

// suppressedSend reports whether a stored error is that of a send refused
// for a suppressed recipient.
func suppressedSend(err string) bool {
	return strings.HasPrefix(err, suppressedPrefix) || err == legacySuppressedMsg
}

// suppressionDetails are the errorDetails of such a send.
func suppressionDetails(companyID string) map[string]any {
	return map[string]any{"suppressions": "/api/companies/" + companyID + "/email/suppressions"}
}
