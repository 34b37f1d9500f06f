package temporal

import (
	"bytes"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// TestAESCodec: an encoded payload hides its content, decodes back to it,
// and is refused by a codec of another key.
func TestAESCodec(t *testing.T) {
	c, err := NewAESCodec("k1", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(runRequest{Input: "refund order A-1234 to my card"})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc[0].Data, []byte("A-1234")) {
		t.Errorf("the encoded payload shows its content")
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	var got runRequest
	if err := converter.GetDefaultDataConverter().FromPayload(dec[0], &got); err != nil || got.Input != "refund order A-1234 to my card" {
		t.Errorf("decoded %+v (%v)", got, err)
	}
	other, _ := NewAESCodec("k2", bytes.Repeat([]byte{8}, 32))
	if _, err := other.Decode(enc); err == nil {
		t.Error("a codec of another key decoded the payload")
	}
	enc[0].Data[len(enc[0].Data)-1] ^= 1
	if _, err := c.Decode(enc); err == nil {
		t.Error("a tampered payload decoded")
	}
}

// TestTurnEncrypted runs a turn with every payload going through the
// codec.
func TestTurnEncrypted(t *testing.T) {
	e := newEnv(t, weather(), LoopOptions{})
	c, _ := NewAESCodec("k1", bytes.Repeat([]byte{7}, 32))
	e.te.SetDataConverter(converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c))
	var o outcome
	e.update(time.Second, UpdateRun, &o, runRequest{Input: "weather?"})
	e.run()
	if o.err != nil || !o.res.Done || len(o.res.Calls) != 2 {
		t.Fatalf("run = %+v, %v", o.res, o.err)
	}
}
