package emulator

import (
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/emersion/go-smtp"
)

// maxSMTPMessageBytes bounds one inbound SMTP message.
const maxSMTPMessageBytes = 35 << 20

func newSMTPServer(s *Server) *smtp.Server {
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &smtpSession{s: s}, nil
	}))
	srv.Domain = "mx.agentmail.emulator"
	srv.MaxMessageBytes = maxSMTPMessageBytes
	srv.MaxRecipients = 50
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	srv.AllowInsecureAuth = true
	return srv
}

// smtpSession accepts mail for hosted inboxes only (relaying is refused
// per recipient with 550).
type smtpSession struct {
	s    *Server
	rcpt []string
}

// Reset discards the current transaction's recipients.
func (ss *smtpSession) Reset() { ss.rcpt = nil }

// Logout ends the session; there is nothing to release.
func (ss *smtpSession) Logout() error { return nil }

// Mail accepts any envelope sender; the From header is what gets stored.
func (ss *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }

// Rcpt accepts hosted inbox addresses and refuses relaying with 550.

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.mu.Lock()
	ib := ss.s.state.lookupInbox(addrOnly(to))
	ss.s.mu.Unlock()
	if ib == nil {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such mailbox: " + to}
	}
	ss.rcpt = append(ss.rcpt, ib.id)
	return nil
}

// Data parses the message and stores it in every accepted recipient inbox.
func (ss *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if _, err := ss.s.DeliverRaw(ss.rcpt, bytes.Clone(raw)); err != nil {
		if errors.Is(err, ErrNoSuchInbox) {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "Mailbox disappeared"}
		}
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message could not be parsed"}
	}
	return nil
}
