package temporal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// The metadata of a payload the AES codec encrypted.
const (
	encodingKey       = "encoding"
	encryptedEncoding = "binary/encrypted"
	keyIDKey          = "encryption-key-id"
)

// AESCodec is a payload codec that encrypts every payload with AES-GCM,
// so that the arguments, outputs and answers in a workflow's history are
// not readable by the server's operators. A program wraps its data
// converter with it on the client and on every worker:
//
//	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
//	c, err := client.Dial(client.Options{DataConverter: dc, …})
//
// KeyID names the key in each payload, so that keys can be rotated: a
// codec decodes only payloads of its own key (and plain ones).
type AESCodec struct {
	keyID string
	aead  cipher.AEAD
}

var _ converter.PayloadCodec = (*AESCodec)(nil)

// NewAESCodec returns a codec encrypting with key (16, 24 or 32 bytes),
// named keyID.
func NewAESCodec(keyID string, key []byte) (*AESCodec, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("temporal: codec key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &AESCodec{keyID: keyID, aead: aead}, nil
}

// Encode encrypts each payload (its metadata and data) into one.
func (c *AESCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
		rand.Read(nonce)
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{encodingKey: []byte(encryptedEncoding), keyIDKey: []byte(c.keyID)},
			Data:     c.aead.Seal(nonce, nonce, plain, []byte(c.keyID)),
		}
	}
	return out, nil
}

// Decode decrypts the payloads this codec's key encrypted, and passes
// plain ones through; a payload of another key is an error.
func (c *AESCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.Metadata[encodingKey]) != encryptedEncoding {
			out[i] = p
			continue
		}
		if id := string(p.Metadata[keyIDKey]); id != c.keyID {
			return nil, fmt.Errorf("temporal: a payload encrypted with key %q, not %q", id, c.keyID)
		}
		n := c.aead.NonceSize()
		if len(p.Data) < n {
			return nil, errors.New("temporal: an encrypted payload too short to hold its nonce")
		}
		plain, err := c.aead.Open(nil, p.Data[:n], p.Data[n:], []byte(c.keyID))
		if err != nil {
			return nil, fmt.Errorf("temporal: decrypt a payload: %w", err)
		}
		var q commonpb.Payload
		if err := q.Unmarshal(plain); err != nil {
			return nil, err
		}
		out[i] = &q
	}
	return out, nil
}
