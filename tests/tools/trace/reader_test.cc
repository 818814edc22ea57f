// The reader on well-formed and malformed input: both schemas, gzip and plain, and precise
// errors (file, node id, field) instead of crashes.
#include "chameleon/trace/reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "trace_fixtures.h"

namespace chameleon::trace {
namespace {

using testing::FakeNode;
using ::testing::HasSubstr;
using testing::json;
using testing::Tensor;

std::vector<FakeNode> SmallTrace() {
  return {{2, 1, "[pytorch|profiler|execution_trace|thread]"},
          {4, 2, "aten::mul", {Tensor(100, 50, 8), 3}, {Tensor(101, 51, 8)}},
          {3, 2, "aten::empty", {}, {Tensor(102, 52, 8, 4, "cpu")}}};
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/trace_reader_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string ErrorOf(const std::string& text) {
  try {
    ParseTrace(text, "bad.json");
  } catch (const TraceError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TraceReader, ShouldReadBothSchemasIntoTheSameTree) {
  for (bool chakra : {false, true}) {
    const Trace t = ParseTrace(testing::Document(SmallTrace(), chakra), "x.json");
    ASSERT_EQ(t.nodes.size(), 4u) << chakra;
    EXPECT_EQ(t.nodes[2].id, 3) << "nodes are sorted by id";
    EXPECT_EQ(t.nodes[3].name, "aten::mul");
    EXPECT_EQ(t.nodes[3].rf_id, 4);
    EXPECT_EQ(t.nodes[3].parent, 1);
    EXPECT_EQ(t.nodes[1].children, (std::vector<std::uint32_t>{2, 3}));
    ASSERT_EQ(t.nodes[3].inputs.size(), 1u) << "the Int argument is not a tensor";
    EXPECT_EQ(t.nodes[3].inputs[0].storage_id, 50u);
    EXPECT_TRUE(t.nodes[3].inputs[0].cuda);
    EXPECT_FALSE(t.nodes[2].outputs[0].cuda);
  }
}

// PyTorch names the thread root's parent (the process node) even when that node is not in the
// file; older releases call the roots "execution_graph". Such a node is a root.
TEST(TraceReader, ShouldTreatAProfilerRootWithAnAbsentParentAsARoot) {
  json doc = {{"schema", "1.0.1"}, {"pid", 1}, {"nodes", json::array()}};
  doc["nodes"].push_back(testing::Node101({2, 1, "[pytorch|profiler|execution_graph|thread]"}));
  doc["nodes"].push_back(
      testing::Node101({3, 2, "aten::mul", {Tensor(1, 5, 8)}, {Tensor(2, 6, 8)}}));
  const Trace t = ParseTrace(doc.dump(), "cut.json");
  ASSERT_EQ(t.nodes.size(), 2u);
  EXPECT_EQ(t.nodes[0].parent, -1);
  EXPECT_EQ(t.nodes[1].parent, 0);
  // Any other node with an absent parent is still an error.
  doc["nodes"][1]["parent"] = 99;
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node 3: parent: no node with id 99"));
}

// 1.1.0-chakra has the 1.0.3-chakra node layout plus fields and attributes this reader does not
// use: they are ignored. Another version is refused by name.
TEST(TraceReader, ShouldReadSchema110AndIgnoreUnknownAttributes) {
  json doc = json::parse(testing::Document(SmallTrace(), /*chakra=*/true));
  doc["schema"] = "1.1.0-chakra.0.0.4";
  for (json& node : doc["nodes"]) {
    node["inputs"]["strides"] = json::array();
    node["attrs"].push_back({{"name", "fw_tid"}, {"type", "uint64"}, {"value", 7}});
    node["exclusive_dur"] = 12;
  }
  const Trace t = ParseTrace(doc.dump(), "new.json");
  EXPECT_EQ(t.schema, "1.1.0-chakra.0.0.4");
  ASSERT_EQ(t.nodes.size(), 4u);
  EXPECT_EQ(t.nodes[3].rf_id, 4);
  EXPECT_EQ(t.nodes[3].inputs.size(), 1u);
  doc["schema"] = "2.0.0";
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("schema: unsupported version '2.0.0'"));
}

TEST(TraceReader, ShouldRefuseADirectoryNamingWhatItExpects) {
  TempDir dir;
  std::filesystem::create_directory(dir.File("ranks"));
  try {
    ReadTrace(dir.File("ranks"));
    FAIL() << "a directory was read as a trace";
  } catch (const TraceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
}

TEST(TraceReader, ShouldReadGzipAndPlainFilesAlike) {
  TempDir dir;
  const std::string text = testing::Document(SmallTrace(), true);
  WriteGzip(dir.File("t.json.gz"), text);
  std::ofstream(dir.File("t.json")) << text;
  const Trace gz = ReadTrace(dir.File("t.json.gz"));
  const Trace plain = ReadTrace(dir.File("t.json"));
  ASSERT_EQ(gz.nodes.size(), plain.nodes.size());
  EXPECT_EQ(gz.schema, "1.0.3-chakra.0.0.4");
  EXPECT_EQ(gz.nodes[3].inputs[0].numel, plain.nodes[3].inputs[0].numel);
}

TEST(TraceReader, ShouldRejectTruncatedGzipNamingTheFile) {
  TempDir dir;
  const std::string path = dir.File("cut.json.gz");
  WriteGzip(path, testing::Document(SmallTrace()));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  try {
    ReadTrace(path);
    FAIL() << "truncated gzip accepted";
  } catch (const TraceError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("truncated"));
  }
}

TEST(TraceReader, ShouldRejectMissingFile) {
  EXPECT_THROW(ReadTrace("/nonexistent/trace.json.gz"), TraceError);
}

TEST(TraceReader, ShouldNameNodeAndFieldOfAWrongType) {
  json doc = json::parse(testing::Document(SmallTrace()));
  doc["nodes"][2]["name"] = 17;  // node id 4
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("bad.json: node 4: name: expected string"));
  doc = json::parse(testing::Document(SmallTrace()));
  doc["nodes"][2]["inputs"][0][3] = "many";  // numel of node 4's first input
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node 4: inputs[0].numel: expected integer"));
  doc = json::parse(testing::Document(SmallTrace(), true));
  doc["nodes"][2]["inputs"]["values"][0] = json::array({1, 2, 3});
  EXPECT_THAT(ErrorOf(doc.dump()),
              HasSubstr("node 4: inputs.values[0]: expected [tensor_id, storage_id"));
}

TEST(TraceReader, ShouldNameMissingFields) {
  json doc = json::parse(testing::Document(SmallTrace()));
  doc["nodes"][2].erase("outputs");
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node 4: outputs: missing"));
  doc = json::parse(testing::Document(SmallTrace(), true));
  doc["nodes"][2].erase("id");
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node #2 (no id): id: missing"));
  doc = json::parse(testing::Document(SmallTrace(), true));
  doc["nodes"][2].erase("ctrl_deps");
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node 4: ctrl_deps: missing"));
  doc.erase("nodes");
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("nodes: missing"));
}

TEST(TraceReader, ShouldRejectDanglingReferences) {
  json doc = json::parse(testing::Document(SmallTrace()));
  doc["nodes"][2]["inputs"][0][1] = 0;  // storage id 0 for an 8-element tensor
  EXPECT_THAT(ErrorOf(doc.dump()),
              HasSubstr("node 4: inputs[0].storage_id: dangling storage id 0"));
  doc = json::parse(testing::Document(SmallTrace()));
  doc["nodes"][2]["parent"] = 999;
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node 4: parent: no node with id 999"));
  doc = json::parse(testing::Document(SmallTrace()));
  doc["nodes"][3]["id"] = 4;
  EXPECT_THAT(ErrorOf(doc.dump()), HasSubstr("node 4: id: duplicate"));
}

TEST(TraceReader, ShouldRejectInvalidJson) {
  const std::string text = testing::Document(SmallTrace());
  EXPECT_THAT(ErrorOf(text.substr(0, text.size() / 2)), HasSubstr("bad.json: invalid JSON"));
  EXPECT_THAT(ErrorOf("[1, 2]"), HasSubstr("top level: expected object"));
}

// Cut and byte-flipped variants of a valid document: each parses or throws TraceError, never
// anything else (run under ASan/UBSan too).
TEST(TraceReader, ShouldSurviveTruncationAndCorruption) {
  const std::string text =
      testing::Document(SmallTrace(), true) + testing::Document(SmallTrace(), false);
  std::uint64_t state = 12345;
  auto next = [&state] {
    return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33;
  };
  const std::string_view kNoise = "{}[]\\\",:0-9 ae";
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string t = text.substr(0, i < 1000 ? next() % text.size() : text.size());
    for (int k = 0; k < 3 && i >= 1000; ++k) t[next() % t.size()] = kNoise[next() % kNoise.size()];
    try {
      ParseTrace(t, "fuzz.json");
    } catch (const TraceError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace chameleon::trace
