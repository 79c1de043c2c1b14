package inbound_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// socketOwners maps each client address in peers (host:port, as the
// emulator reports its WebSocket peers) to the pid among pids that holds
// that TCP connection, through /proc/net/tcp (local port → socket inode)
// and /proc/<pid>/fd (inode → process). Peers of no listed process (a
// process that just died) are absent from the result.
func socketOwners(peers []string, pids []int) map[string]int {
	ports := map[int]string{}
	for _, p := range peers {
		if _, port, err := net.SplitHostPort(p); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				ports[n] = p
			}
		}
	}
	inodes := map[string]string{} // "socket:[inode]" → peer
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			i := strings.LastIndexByte(fields[1], ':')
			port, err := strconv.ParseInt(fields[1][i+1:], 16, 32)
			if err != nil {
				continue
			}
			if peer, ok := ports[int(port)]; ok {
				inodes[fmt.Sprintf("socket:[%s]", fields[9])] = peer
			}
		}
		f.Close()
	}
	owners := map[string]int{}
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			link, err := os.Readlink(dir + "/" + e.Name())
			if err != nil {
				continue
			}
			if peer, ok := inodes[link]; ok {
				owners[peer] = pid
			}
		}
	}
	return owners
}
