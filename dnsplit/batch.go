package dnsplit

import "net/netip"

// Reading datagrams in batches. Under load the forwarder's work is its
// system calls (a CPU profile of BenchmarkForwarder: 59 % in Syscall6,
// parsing and packing 3 %): a read from the client, a write upstream, a
// read of the answer and a write back, four per query. Where the OS has
// recvmmsg (Linux), one read takes every datagram already queued on the
// socket, as many as a batch holds, so a busy forwarder reads a burst of
// queries or answers for the price of one call and one wake-up; an idle
// one reads one datagram per call as before, with no added wait (a batch
// read returns what is there once at least one is).

const (
	// clientBatch datagrams of at most maxQueryUDP bytes are read from
	// clients at once. A query is one question and an OPT record: tens of
	// bytes; a datagram longer than maxQueryUDP is no query of ours.
	clientBatch = 16
	maxQueryUDP = 4096
	// answerBatch answers of at most maxAnswerUDP bytes are read from one
	// upstream socket at once. A longer answer (a server answering past
	// 4,096 bytes over UDP) is read truncated and treated as a truncated
	// answer: the same server is asked again over TCP.
	answerBatch  = 8
	maxAnswerUDP = 4096
)

// datagram is one datagram read: b is valid until the reader's next read.
type datagram struct {
	b     []byte
	from  netip.AddrPort // the sender (unset on a connected socket where the OS does not say)
	trunc bool           // longer than the buffer: b holds its start only
}

// packetReader reads one socket's datagrams, a batch at a time where the
// OS can (batch_linux.go), else one at a time (batch_other.go).
type packetReader interface {
	// read waits for at least one datagram and returns every one queued,
	// up to the batch size.
	read() ([]datagram, error)
}
