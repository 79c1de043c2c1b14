package server_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkAttachmentRoundTrip uploads a 5 MiB file through the API and
// downloads it again, on each database. Each iteration uploads different
// bytes (no deduplication); the client's sha256 check of the download is
// part of the op. It reports MiB/s of upload+download (10 MiB
// moved per op), the process's CPU per op (the in-process server and the
// client; PostgreSQL's own processes are not counted), the bytes allocated
// per op and the load average at the end.
func BenchmarkAttachmentRoundTrip(b *testing.B) {
	const size = 5 << 20
	dbtest.EachURLBench(b, func(b *testing.B, _ db.Dialect, url string) {
		cfg := testkit.Config(b, url)
		cfg.LogLevel = "info"
		inst := testkit.Start(b, cfg)
		c := testkit.NewClient(b, inst.URL())
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Bench"}, 201))
		iid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "files"}, 201))
		data := make([]byte, size)
		_, _ = rand.Read(data)
		hc := &http.Client{}
		var up, down time.Duration
		b.ReportAllocs()
		cpu0 := benchCPU()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			// A fresh first 8 bytes: different content every time, so
			// nothing is deduplicated.
			b.StopTimer()
			binary.BigEndian.PutUint64(data, uint64(time.Now().UnixNano()))
			sum := sha256.Sum256(data)
			b.StartTimer()
			t0 := time.Now()
			id := benchUpload(b, hc, inst.URL()+"/api/issues/"+iid+"/attachments", data)
			t1 := time.Now()
			resp, err := hc.Get(inst.URL() + "/api/attachments/" + id + "/content")
			if err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || n != size || hex.EncodeToString(h.Sum(nil)) != hex.EncodeToString(sum[:]) {
				b.Fatalf("download: %d, %d bytes, %v", resp.StatusCode, n, err)
			}
			up += t1.Sub(t0)
			down += time.Since(t1)
		}
		b.StopTimer()
		cpu := benchCPU() - cpu0
		mib := float64(size) / (1 << 20)
		b.ReportMetric(2*mib*float64(b.N)/(up+down).Seconds(), "MiB/s")
		b.ReportMetric(mib*float64(b.N)/up.Seconds(), "up-MiB/s")
		b.ReportMetric(mib*float64(b.N)/down.Seconds(), "down-MiB/s")
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		if la, err := os.ReadFile("/proc/loadavg"); err == nil {
			var l1 float64
			fmt.Sscan(strings.Fields(string(la))[0], &l1)
			b.ReportMetric(l1, "load1")
		}
	})
}

// benchUpload streams data as the multipart "file" part and returns the
// new attachment's id.
func benchUpload(b *testing.B, hc *http.Client, url string, data []byte) string {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; filename="bench.zip"`},
			"Content-Type": {"application/zip"}})
		if err == nil {
			_, err = io.Copy(part, bytes.NewReader(data))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", url, pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || json.Unmarshal(raw, &out) != nil {
		b.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	return out.ID
}

// benchCPU is this process's user plus system CPU time.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
