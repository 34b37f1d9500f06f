package foundrytest

import (
	"crypto/tls"
	"strings"
	"sync"
)

// localhostCert is the fake's TLS certificate: a self-signed ECDSA P-256
// certificate with the hosts and validity of net/http/httptest's RSA one
// (127.0.0.1, ::1, example.com and *.example.com, until 2084), generated
// from src/crypto/tls with
//
//	go run generate_cert.go --ecdsa-curve P256 --host 127.0.0.1,::1,example.com,*.example.com --ca --start-date "Jan 1 00:00:00 1970" --duration=1000000h
//
// An ECDSA handshake costs the server a small fraction of an RSA-2048 one,
// which matters when many clients connect at once. It is the same in every
// process, as httptest's is, so that a certificate one process wrote is
// trusted by the server of another.
var localhostCert = []byte(`-----BEGIN CERTIFICATE-----
MIIBvjCCAWOgAwIBAgIRAJdp32cRRt8Dfz303uPOVXAwCgYIKoZIzj0EAwIwEjEQ
MA4GA1UEChMHQWNtZSBDbzAgFw03MDAxMDEwMDAwMDBaGA8yMDg0MDEyOTE2MDAw
MFowEjEQMA4GA1UEChMHQWNtZSBDbzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IA
BPUV25YM8xxkiUbKkSWnfoSyZHYm3w/SF0O5NojN2QzJV32iX9KK4VqseguE5KhG
wbPogPUSAub156uKfqSOso6jgZcwgZQwDgYDVR0PAQH/BAQDAgKEMBMGA1UdJQQM
MAoGCCsGAQUFBwMBMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0OBBYEFPNt0M9MqTtn
v3x8TzuvX9st8W59MD0GA1UdEQQ2MDSCC2V4YW1wbGUuY29tgg0qLmV4YW1wbGUu
Y29thwR/AAABhxAAAAAAAAAAAAAAAAAAAAABMAoGCCqGSM49BAMCA0kAMEYCIQDL
VZ6P8rlEc+e/d6GvFDX/OlBPAJYWsA3L8oiTYihpzQIhAKH8vTpTAyKVdvuzDX0X
lk0ZXVH2JEKsWPNRH9fqfcJG
-----END CERTIFICATE-----
`)

// localhostKey is localhostCert's key ("TESTING KEY" keeps secret
// scanners quiet, as in net/http/internal/testcert).
var localhostKey = []byte(strings.ReplaceAll(`-----BEGIN TESTING KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJ+lR1jvLBzCDRIX4
9qVbrADHWBHhfqZqwye2xi8eok2hRANCAAT1FduWDPMcZIlGypElp36EsmR2Jt8P
0hdDuTaIzdkMyVd9ol/SiuFarHoLhOSoRsGz6ID1EgLm9eerin6kjrKO
-----END TESTING KEY-----
`, "TESTING KEY", "PRIVATE KEY"))

// tlsCertificate returns localhostCert with its key, parsed once.
var tlsCertificate = sync.OnceValue(func() tls.Certificate {
	cert, err := tls.X509KeyPair(localhostCert, localhostKey)
	if err != nil {
		panic("foundrytest: the certificate does not parse: " + err.Error())
	}
	return cert
})
