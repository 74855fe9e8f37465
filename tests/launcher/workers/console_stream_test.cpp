// ConsoleStream: prefixes where lines start ('\n' and '\r'), partial lines passed on, another
// rank's text never inside an open line, an interrupted prompt shown again (console_stream.hpp).
#include "launcher/workers/console_stream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

namespace {

// A scratch file both "screens" write to, read back whole.
struct Screen {
  std::string path;
  int fd = -1;
  Screen() {
    char name[] = "/tmp/console_stream_testXXXXXX";
    fd = ::mkstemp(name);
    path = name;
  }
  ~Screen() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string text() const {
    std::string out;
    char buf[4096];
    const int in = ::open(path.c_str(), O_RDONLY);
    ssize_t n;
    while ((n = ::read(in, buf, sizeof(buf))) > 0) out.append(buf, static_cast<std::size_t>(n));
    ::close(in);
    return out;
  }
};

}  // namespace

TEST_CASE("lines get the prefix where they start, a partial line is passed on as it is",
          "[console]") {
  Screen s;
  ddp::ConsoleStream a(s.fd, "[a]:");
  a.write("one\ntwo");
  CHECK(s.text() == "[a]:one\n[a]:two");
  a.write(" more\n\n");
  CHECK(s.text() == "[a]:one\n[a]:two more\n[a]:\n");
}

TEST_CASE("a carriage return starts the line again with its prefix; \\r\\n ends it", "[console]") {
  Screen s;
  ddp::ConsoleStream a(s.fd, "[a]:");
  a.write("\r 10%");
  a.write("\r 20%");
  a.write("\r\n");
  a.write("done\r\n");
  CHECK(s.text() == "\r[a]: 10%\r[a]: 20%\r\n[a]:done\r\n");
}

TEST_CASE("another stream's text ends an open line first and shows the prompt again after it",
          "[console]") {
  Screen s;
  ddp::ConsoleStream a(s.fd, "[a]:");
  ddp::ConsoleStream b(dup(s.fd), "[b]:");  // another descriptor of the same file: one screen
  a.write("(Pdb) ");
  b.write("tick 1\n");
  b.write("tick 2\n");
  CHECK(s.text() == "[a]:(Pdb) \n[b]:tick 1\n[a]:(Pdb) \n[b]:tick 2\n[a]:(Pdb) ");
  a.write("42\n");  // what rank a printed after the user answered
  CHECK(s.text() == "[a]:(Pdb) \n[b]:tick 1\n[a]:(Pdb) \n[b]:tick 2\n[a]:(Pdb) 42\n");
}

TEST_CASE("an open line of another stream is not continued by a partial line", "[console]") {
  Screen s;
  ddp::ConsoleStream a(s.fd, "[a]:");
  ddp::ConsoleStream b(s.fd, "[b]:");
  a.write("\rprogress 1");
  b.write("half");
  b.write(" a line\n");
  a.write("\rprogress 2");
  CHECK(s.text() == "\r[a]:progress 1\n[b]:half a line\n[a]:progress 1\r[a]:progress 2");
}

TEST_CASE("endLine completes an open line once, and a closed stream is forgotten", "[console]") {
  Screen s;
  {
    ddp::ConsoleStream a(s.fd, "[a]:");
    a.write("last words");
    a.endLine();
    a.endLine();
    a.write("x");
  }  // destroyed with its line open: nobody shows it again
  ddp::ConsoleStream b(s.fd, "[b]:");
  b.write("next\n");
  CHECK(s.text() == "[a]:last words\n[a]:x[b]:next\n");
}

TEST_CASE("streams on different files do not end each other's lines", "[console]") {
  Screen one, two;
  ddp::ConsoleStream a(one.fd, "[a]:");
  ddp::ConsoleStream b(two.fd, "[b]:");
  a.write("50%");
  b.write("line\n");
  CHECK(one.text() == "[a]:50%");
  CHECK(two.text() == "[b]:line\n");
}
