package resilienceredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// installHint is what a developer without redis-server is told.
const installHint = "apt-get update && apt-get install -y redis-server"

// redisServer is a redis-server of the test's own, on a free loopback
// port, without persistence, in a temporary directory. Stop and Start
// keep the port, so clients reconnect to the restarted server.
type redisServer struct {
	tb       testing.TB
	bin      string
	dir      string
	port     int
	cmd      *exec.Cmd
	waitExit chan error
}

// startRedis starts a server for tb and stops it when tb ends. Without the
// binary it skips, or fails when CI is set: CI must run every Redis test.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redis-server not found and CI is set; install it with: %s", installHint)
		}
		tb.Skipf("redis-server not found; install it with: %s", installHint)
	}
	s := &redisServer{tb: tb, bin: bin, dir: tb.TempDir()}
	// A port picked by the kernel may be taken again before the server
	// binds it; try a few.
	for i := 0; ; i++ {
		s.port = freePort(tb)
		if err := s.start(); err == nil {
			break
		} else if i == 4 {
			tb.Fatalf("start redis-server: %v", err)
		}
	}
	tb.Cleanup(s.Stop)
	return s
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) start() error {
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.cmd = cmd
			s.waitExit = exited
			return nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server not answering: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start restarts a stopped server on the same port.
func (s *redisServer) Start() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatalf("restart redis-server: %v", err)
	}
}

// Stop ends the server (its data is lost: nothing is persisted).
func (s *redisServer) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot act on SIGTERM
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waitExit:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.waitExit
	}
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): connections stay open and nothing
// answers, the worst case for a client. Resume undoes it.
func (s *redisServer) Pause()  { s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *redisServer) Resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Client returns a client of the server, closed when the test ends.
func (s *redisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.tb.Cleanup(func() { c.Close() })
	return c
}

// unreachableClient is a client for tests that must not reach Redis.
func unreachableClient(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	tb.Cleanup(func() { c.Close() })
	return c
}
