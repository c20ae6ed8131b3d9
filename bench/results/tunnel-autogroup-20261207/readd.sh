L=bin/runos-lab; D=/tmp/lab
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
GWPUB=$(ex ky3-n1 wg show wgvpn public-key); GWPORT=$(ex ky3-n1 wg show wgvpn listen-port)
ex ky3-n1 wg set wgvpn peer $(wg pubkey < /tmp/kx) allowed-ips 100.96.9.9/32
ex client wg set wgx peer $GWPUB allowed-ips 100.100.1.1/32 endpoint 10.77.0.21:$GWPORT persistent-keepalive 1
