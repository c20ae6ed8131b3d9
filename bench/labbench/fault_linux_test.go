package labbench

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkPageFault is what faulting fresh anonymous memory in costs on
// this machine: the price a transfer pays for the packet buffers that the
// daemon gave back after the previous one (vpnd/trim.go). Each op maps
// 100 MiB, writes one byte per 4 KiB page and unmaps it; touch-again is
// the same writes on pages already there. On the virtual machines these
// numbers come from a fault costs ~12 µs (nested paging); on hardware it
// is typically well under 1 µs.
func BenchmarkPageFault(b *testing.B) {
	const size, page = 100 << 20, 4096
	var faultNs, againNs int64
	for b.Loop() {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := 0; i < size; i += page {
			m[i] = 1
		}
		mid := time.Now()
		for i := 0; i < size; i += page {
			m[i] = 2
		}
		faultNs += int64(mid.Sub(start))
		againNs += int64(time.Since(mid))
		if err := syscall.Munmap(m); err != nil {
			b.Fatal(err)
		}
	}
	pages := float64(b.N) * size / page
	b.ReportMetric(float64(faultNs)/pages/1e3, "fault-µs/page")
	b.ReportMetric(float64(faultNs)/float64(b.N)/1e6, "fault-ms/100MiB")
	b.ReportMetric(float64(againNs)/float64(b.N)/1e6, "touch-again-ms/100MiB")
}
