package ui

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
)

// uploadAttachment checks the form token inside the multipart body, then
// streams the file to the API as a fresh multipart request (so the API's
// own size, type and authorization rules apply).
func (u *UI) uploadAttachment(c *rc) {
	t, ok := c.loadTask()
	if !ok {
		return
	}
	limit := u.d.Config.AttachmentMaxBytes
	c.r.Body = http.MaxBytesReader(c.w, c.r.Body, limit+256<<10)
	if err := c.r.ParseMultipartForm(1 << 20); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			u.renderTask(c, http.StatusRequestEntityTooLarge, t, taskData{CommentWake: true,
				UploadErr: &APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("This file is larger than the %s limit.", humanBytes(limit))}})
			return
		}
		u.renderTask(c, http.StatusBadRequest, t, taskData{CommentWake: true,
			UploadErr: &APIError{Status: http.StatusBadRequest, Message: "Choose a file to upload."}})
		return
	}
	defer c.r.MultipartForm.RemoveAll()
	if !u.validCSRF(c.r, c.csrfBinding()) {
		c.errorPage(http.StatusForbidden, msgFormExpired)
		return
	}
	file, hdr, err := c.r.FormFile("file")
	if err != nil {
		u.renderTask(c, http.StatusBadRequest, t, taskData{CommentWake: true,
			UploadErr: &APIError{Status: http.StatusBadRequest, Message: "Choose a file to upload."}})
		return
	}
	defer file.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", multipart.FileContentDisposition("file", hdr.Filename))
		ct := hdr.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		part, err := mw.CreatePart(h)
		if err == nil {
			_, err = io.Copy(part, file)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err = c.cl().UploadAttachment(c.ctx(), t.ID, mw.FormDataContentType(), pr)
	if e := uiError(err); e != nil {
		_ = pr.CloseWithError(io.ErrClosedPipe)
		if e.Status == http.StatusNotFound || e.Status == http.StatusForbidden {
			c.fail(e)
			return
		}
		switch e.Status {
		case http.StatusRequestEntityTooLarge:
			e.Message = fmt.Sprintf("This file is larger than the %s limit.", humanBytes(limit))
		case http.StatusUnsupportedMediaType:
			e.Message = "This file type isn’t allowed. (" + e.Message + ")"
		}
		u.renderTask(c, e.Status, t, taskData{CommentWake: true, UploadErr: e})
		return
	}
	c.redirect(fmt.Sprintf("/c/%s/tasks/%s#attachments", c.cid, t.ID), flashUploaded)
}

// downloadAttachment streams an attachment of the company through the API
// (GET /c/{cid}/attachments/{aid}). The API decides whether the actor may
// read its task; the UI answers 404 for another company's attachment under
// this company's URL. It is always a download (Content-Disposition:
// attachment) in a sandboxed, script-less document, and never sniffed.
func (u *UI) downloadAttachment(c *rc) {
	aid, ok := c.requirePathID("aid")
	if !ok {
		return
	}
	att, err := c.cl().Attachment(c.ctx(), aid)
	if e := c.check(err); e != nil {
		c.fail(e)
		return
	}
	if att.CompanyID != c.cid {
		c.notFound()
		return
	}
	// The download streams to the browser: the API handler serves it
	// in-process directly rather than through the buffering client.
	req, _ := http.NewRequestWithContext(c.ctx(), "GET", "/api/attachments/"+aid+"/content", nil)
	req.RemoteAddr = "127.0.0.1:0"
	u.d.API.ServeHTTP(&downloadWriter{ResponseWriter: c.w}, req)
}

// legacyAttachment answers the task-scoped download URL of earlier
// versions (/c/{cid}/tasks/{tid}/attachments/{aid}) with a permanent
// redirect to the company-scoped one, which does every check.
func (u *UI) legacyAttachment(c *rc) {
	_, okT := c.pathUUID("tid")
	aid, okA := c.pathUUID("aid")
	if !okT || !okA {
		c.notFound()
		return
	}
	http.Redirect(c.w, c.r, attachmentPath(c.cid, aid), http.StatusMovedPermanently)
}

// attachmentPath is an attachment's download URL.
func attachmentPath(cid, aid string) string { return "/c/" + cid + "/attachments/" + aid }

// downloadWriter hardens the API's download headers before they are sent.
type downloadWriter struct {
	http.ResponseWriter
	wrote bool
}

func (d *downloadWriter) WriteHeader(code int) {
	if !d.wrote {
		d.wrote = true
		h := d.Header()
		h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "private, no-store")
	}
	d.ResponseWriter.WriteHeader(code)
}

func (d *downloadWriter) Write(b []byte) (int, error) {
	if !d.wrote {
		d.WriteHeader(http.StatusOK)
	}
	return d.ResponseWriter.Write(b)
}
