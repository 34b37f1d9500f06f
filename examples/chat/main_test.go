package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

// TestMain runs the chat itself when the pty test starts this binary as
// the chat.
func TestMain(m *testing.M) {
	if os.Getenv("CHAT_EXAMPLE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const answer = "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f and sunny."

// TestRun runs a chat of two lines from a reader, on every fake.
func TestRun(t *testing.T) {
	for _, backend := range []string{"fake-openai", "fake-foundry", "fake-responses"} {
		t.Run(backend, func(t *testing.T) {
			exampletest.ClearEnv(t)
			t.Setenv("TOOLRELAY_BACKEND", backend)
			var out bytes.Buffer
			in := strings.NewReader("What's the weather like in my favorite city?\nThanks!\nOne more?\n")
			if err := run(t.Context(), in, &out); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Chatting on " + backend + ".", "⚙ getUserFavoriteCity {}", `⚙ getCityNickname {"location":"Seattle, WA"}`, "✓ getCurrentWeatherAtLocation: ok in ",
				answer + "\n> You're welcome! Ask me about the weather anytime.\n> ",
				// The script has two turns: the fake says so.
				"the model script has no more steps"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestTerminal drives the chat in a real terminal (a pseudo-terminal):
// a question typed, the answer seen arriving in pieces and the calls as
// they run, then Ctrl-D, after which the chat exits cleanly.
func TestTerminal(t *testing.T) {
	for _, backend := range []string{"fake-openai", "fake-foundry", "fake-responses"} {
		t.Run(backend, func(t *testing.T) {
			exampletest.ClearEnv(t)
			term := startChat(t, backend)
			term.waitFor(t, "> ")
			term.type_(t, "What's the weather like in my favorite city?\r")
			term.waitFor(t, answer)
			if !term.sawPart(answer) {
				t.Errorf("the answer arrived at once; want it in pieces")
			}
			for _, want := range []string{"⚙ getUserFavoriteCity {}", "✓ getCityNickname: ok", "✓ getCurrentWeatherAtLocation: ok"} {
				if !strings.Contains(term.output(), want) {
					t.Errorf("the terminal does not show %q:\n%s", want, term.output())
				}
			}
			term.waitFor(t, answer+"\r\n> ")
			term.type_(t, "\x04") // Ctrl-D: end of input
			if err := term.wait(10 * time.Second); err != nil {
				t.Fatalf("the chat did not exit cleanly after Ctrl-D: %v\n%s", err, term.output())
			}
		})
	}
}

// TestCtrlC: Ctrl-C ends the chat at once, waiting at the prompt or
// while an answer streams, and the chat exits cleanly.
func TestCtrlC(t *testing.T) {
	for _, during := range []string{"at the prompt", "during an answer"} {
		t.Run(during, func(t *testing.T) {
			exampletest.ClearEnv(t)
			term := startChat(t, "fake-openai")
			term.waitFor(t, "> ")
			if during == "during an answer" {
				term.type_(t, "What's the weather like in my favorite city?\r")
				term.waitFor(t, "⚙ getUserFavoriteCity")
			}
			term.type_(t, "\x03") // Ctrl-C: SIGINT to the chat
			if err := term.wait(10 * time.Second); err != nil {
				t.Fatalf("the chat did not exit cleanly after Ctrl-C %s: %v\n%s", during, err, term.output())
			}
		})
	}
}

// terminal is the chat running on a pseudo-terminal.
type terminal struct {
	master *os.File
	cmd    *exec.Cmd
	done   chan error

	mu    sync.Mutex
	out   bytes.Buffer
	reads []string // the output as it was after each read
}

// startChat starts this binary as the chat on backend, on a new
// pseudo-terminal.
func startChat(t *testing.T, backend string) *terminal {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CHAT_EXAMPLE_MAIN=1", "TOOLRELAY_BACKEND="+backend)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	term := &terminal{master: master, cmd: cmd, done: make(chan error, 1)}
	go term.read()
	go func() { term.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		term.wait(5 * time.Second)
		master.Close()
	})
	return term
}

// openPTY opens a pseudo-terminal's master and slave ends.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// read keeps what the terminal shows, until the chat has gone.
func (term *terminal) read() {
	buf := make([]byte, 4096)
	for {
		n, err := term.master.Read(buf)
		if n > 0 {
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.reads = append(term.reads, term.out.String())
			term.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// sawPart reports whether the terminal once showed a part of text (more
// than nothing, less than all).
func (term *terminal) sawPart(text string) bool {
	term.mu.Lock()
	defer term.mu.Unlock()
	for _, s := range term.reads {
		if strings.Contains(s, text[:4]) && !strings.Contains(s, text) {
			return true
		}
	}
	return false
}

// type_ types s on the terminal's keyboard.
func (term *terminal) type_(t *testing.T, s string) {
	t.Helper()
	if _, err := term.master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits, for ten seconds at most, until the terminal shows s.
func (term *terminal) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(term.output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal does not show %q:\n%s", s, term.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the chat to exit and returns how it did.
func (term *terminal) wait(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	select {
	case err := <-term.done:
		term.done <- err
		return err
	case <-ctx.Done():
		return errors.New("still running")
	}
}
