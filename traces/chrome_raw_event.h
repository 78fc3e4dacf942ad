// Not public API: internal to the Chrome reader (traces/chrome_reader.cpp and its parts).
//
// One trace event as the tokenizer (chrome_tokenizer.cpp) hands it to the phase handlers
// (chrome_event_handler.cpp): the fields the reader knows, each as the JSON value it was
// (kind + value, the raw text of floats kept for exact µs conversion), and the args already
// converted to Args. Fields the reader does not know are not stored.
//
// Invariants: a field that did not appear is kMissing; a field that appeared twice holds the
// last value; an object or array where a scalar was expected is recorded only as its kind
// (kObject / kArray) so the error can say what was found. One RawEvent is reused for every
// event of a trace (reset() between events).
#pragma once

#include <cstdint>
#include <string>

#include "traces/timeline.h"

namespace ddpscope::traces::chrome_detail {

// One decoded field of the current event.
struct FieldValue {
  enum class Kind : uint8_t {
    kMissing,
    kInt,
    kUnsigned,
    kFloat,
    kString,
    kBool,
    kNull,
    kObject,
    kArray
  };
  Kind kind = Kind::kMissing;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
  std::string text;  // string value, or the raw text of a float

  void reset() {
    kind = Kind::kMissing;
    text.clear();
  }
  bool present() const { return kind != Kind::kMissing; }
  // Becomes `other` (whose text is left with this one's old buffer, for reuse).
  void take(FieldValue& other) {
    kind = other.kind;
    i = other.i;
    u = other.u;
    d = other.d;
    b = other.b;
    text.swap(other.text);
  }
  // The value as error messages show it: 12, 1.5, "abc" (quoted, cut after 60 characters),
  // true, null, an object, an array; "nothing" when missing.
  std::string repr() const;
};

// The event keys the reader decodes ("s" is the instant scope, "bp" the flow binding point).
enum class EventField : uint8_t {
  kNone,
  kPh,
  kName,
  kCat,
  kPid,
  kTid,
  kTs,
  kDur,
  kId,
  kBp,
  kScope,
  kBindId,
  kFlowIn,
  kFlowOut,
  kArgs,
};

struct RawEvent {
  FieldValue ph, name, cat, pid, tid, ts, dur, id, bp, scope, bindId, flowIn, flowOut;
  Args args;

  void reset() {
    for (FieldValue* f :
         {&ph, &name, &cat, &pid, &tid, &ts, &dur, &id, &bp, &scope, &bindId, &flowIn, &flowOut}) {
      f->reset();
    }
    args.clear();
  }
  // The slot of a scalar field; nullptr for kNone and kArgs.
  FieldValue* field(EventField which) {
    switch (which) {
      case EventField::kPh:
        return &ph;
      case EventField::kName:
        return &name;
      case EventField::kCat:
        return &cat;
      case EventField::kPid:
        return &pid;
      case EventField::kTid:
        return &tid;
      case EventField::kTs:
        return &ts;
      case EventField::kDur:
        return &dur;
      case EventField::kId:
        return &id;
      case EventField::kBp:
        return &bp;
      case EventField::kScope:
        return &scope;
      case EventField::kBindId:
        return &bindId;
      case EventField::kFlowIn:
        return &flowIn;
      case EventField::kFlowOut:
        return &flowOut;
      default:
        return nullptr;
    }
  }
};

}  // namespace ddpscope::traces::chrome_detail
