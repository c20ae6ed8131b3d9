//go:build !race

package wghost

const raceEnabled = false
