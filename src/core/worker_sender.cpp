#include "core/worker_sender.h"

#include "core/worker.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::MsgType;

namespace {

// The sends of one group as core's INPUTS packer reads them: from send
// `first` on, while peer, layer and operand are those of `first`, each
// record read in place.
class GroupSends final : public PieceSource {
 public:
  GroupSends(const uint8_t* records, uint32_t n, const Send& first) : records_(records), n_(n), first_(first) {}
  bool piece(uint32_t i, PackPiece* p) const override {
    if (i >= n_) return false;
    const Send t = send_record(records_, i);
    if (t.peer != first_.peer || t.layer != first_.layer || t.operand != first_.operand) return false;
    p->offset = t.offset;
    p->count = t.count;
    p->pos = t.pos;
    return true;
  }

 private:
  const uint8_t* records_;
  uint32_t n_;
  Send first_;
};

}  // namespace

void Sender::init(const WorkerConfig* cfg, Port* port, LinkSet* links, Worker* worker, const uint8_t* base) {
  cfg_ = cfg;
  port_ = port;
  links_ = links;
  worker_ = worker;
  base_ = base;
}

void Sender::reset() {
  sending_ = false;
  ps_phase_ = false;
  done_pending_ = false;
  pass_ = Pass::All;
  then_coord_ = false;
}

void Sender::take(const FragLayer& e) {
  out_.sends = e.sends;
  out_.n_sends = e.n_sends;
  out_.out_at = e.out_at;
  out_.outputs = e.out_elems;
  out_.flags = e.flags;
  const bool coded = (e.flags & (kEntryCoded | kEntryMasked)) != 0;
  out_.code = coded ? code_params_for(e.desc.out_zp, e.desc.act_min, (e.flags & kEntryMasked) != 0) : CodeParams();
}

void Sender::send_sums(const FragLayer& e, uint32_t us) {
  report_.us = us;
  take(e);
  out_.sends = e.ps_sends;
  out_.n_sends = e.n_ps_sends;
  out_.out_at = e.ps_at;
  layer_ = uint16_t(e.node);
  cur_ = PackCursor();
  frames_ = bytes_ = 0;
  ps_phase_ = true;
  sending_ = true;
  done_pending_ = false;
  pass_ = Pass::All;
}

void Sender::send_halos(const FragLayer& e) {
  take(e);
  layer_ = uint16_t(e.node);
  cur_ = PackCursor();
  frames_ = bytes_ = 0;
  sending_ = true;
  done_pending_ = false;
  pass_ = Pass::Peers;
  then_coord_ = false;
}

void Sender::send_results(const FragLayer& e, const LayerReport& r) {
  report_ = r;
  sending_ = true;
  done_pending_ = true;
  if (pass_ == Pass::Peers && !then_coord_ && layer_ == uint16_t(e.node)) {
    // send_halos' peer pass goes on where it is, then the coordinator's.
    then_coord_ = true;
    return;
  }
  then_coord_ = false;
  pass_ = Pass::All;
  take(e);
  layer_ = uint16_t(e.node);
  cur_ = PackCursor();
  if (!e.partial()) frames_ = bytes_ = 0;  // a reduced layer counts its sums' frames too
}

// To a board: as few INPUTS frames as the group's bytes need, the payload
// packed in place in the transmit buffer.
bool Sender::send_inputs(int link, const Send& s) {
  uint8_t* payload = links_->tx() + wire::kHeaderSize;
  // Activations go coded where the plan says so; partial sums never do.
  const bool coded = (out_.flags & (kEntryCoded | kEntryMasked)) && !ps_phase_;
  const GroupSends group(out_.sends, out_.n_sends, s);
  const PackedFrame f = coded ? pack_coded_inputs_frame(group, &cur_, base_ + out_.out_at, payload, out_.code)
                              : pack_inputs_frame(group, &cur_, base_ + out_.out_at, payload);
  bytes_ += uint32_t(wire::kHeaderSize + f.payload);
  return links_->send_frame(link, MsgType::Inputs, s.layer, wire::input_offset(s.operand, 0), payload, f.payload,
                            uint16_t((f.last ? wire::kFlagLast : 0) | (coded ? wire::kFlagCoded : 0)), true);
}

bool Sender::send_done(int coord) {
  wire::DonePayload d;
  d.request_seq = report_.seq;
  d.elapsed_us = report_.us;
  d.compute_instructions = report_.instructions;
  d.peak_ram_bytes = report_.peak;
  d.frames_sent = frames_;
  d.bytes_sent = bytes_;
  d.outputs = out_.outputs;
  d.output_digest = report_.digest;
  d.wait_us = report_.wait_us;
  d.span_us = port_->now_us() - report_.ready_at_us;
  uint8_t buf[wire::DonePayload::kSize];
  d.encode(buf, sizeof buf);
  // Relay: the coordinator answers DONE with the next RUN, ACK it now.
  // Direct: DONE is telemetry; the coordinator ACKs a batch of them (every
  // 32, or when our window fills), not each one.
  return links_->send_frame(coord, MsgType::Done, layer_, 0, buf, uint16_t(sizeof buf),
                            wire::kFlagLast | (out_.flags & kEntryRunTrigger ? wire::kFlagAckReq : 0), true);
}

bool Sender::pump() {
  const uint8_t* out = base_ + out_.out_at;
  while (sending_) {
    if (cur_.i < out_.n_sends) {
      const Send s = send_record(out_.sends, cur_.i);
      const bool to_coord = s.peer == kPeerCoordinator;
      if ((pass_ == Pass::Peers && to_coord) || (pass_ == Pass::Coordinator && !to_coord)) {
        ++cur_.i;
        cur_.off = 0;
        continue;
      }
      const int coord = links_->coord();
      const int link = to_coord ? coord : links_->link_to(s.peer);
      if (link < 0) {
        if (coord >= 0) links_->send_error(coord, ErrorCode::Internal, report_.seq, "cannot reach a peer board");
        worker_->abort_layer();
        return false;
      }
      if (!links_->can_send(link)) return true;
      // A keyed peer link sends once both HELLOs are in (its keys derived).
      if (cfg_->has_key && !(*links_)[link].tx.active()) return true;
      if (!to_coord) {
        if (!send_inputs(link, s)) {
          if (coord >= 0) links_->send_error(coord, ErrorCode::Internal, report_.seq, "link to a peer board failed");
          worker_->abort_layer();
          return false;
        }
        ++frames_;
        continue;
      }
      const uint32_t n = uint32_t(wire::frame_payload(s.count, cur_.off));
      const bool last = cur_.off + n == s.count;
      if (!links_->send_frame(link, MsgType::Output, layer_, s.offset + cur_.off, out + s.pos + cur_.off, uint16_t(n),
                              last ? wire::kFlagLast : 0, true)) {
        worker_->abort_layer();
        return false;
      }
      ++frames_;
      bytes_ += uint32_t(wire::kHeaderSize + n);
      cur_.off += n;
      if (last) {
        ++cur_.i;
        cur_.off = 0;
      }
      continue;
    }
    if (pass_ == Pass::Peers) {
      if (!then_coord_) {
        sending_ = false;  // the halos are out; the layer's results follow (send_results)
        return true;
      }
      pass_ = Pass::Coordinator;
      then_coord_ = false;
      cur_ = PackCursor();
      continue;
    }
    if (done_pending_) {
      const int coord = links_->coord();
      if (coord >= 0) {
        if (!links_->can_send(coord)) return true;
        if (!send_done(coord)) return false;
      }
      done_pending_ = false;
    }
    sending_ = false;
  }
  return true;
}

}  // namespace core
}  // namespace ts
