// Joins the test suite in avgpool_tests_single only: proves that the suite was compiled against
// the generated single header and not against include/avgpool/.
#include <avgpool/avgpool.hpp>

#include <gtest/gtest.h>

#ifndef AVGPOOL_SINGLE_HEADER
#error "avgpool_tests_single must see the generated single header, not include/avgpool/"
#endif

TEST(SingleHeader, TheSuiteUsesTheGeneratedHeader) {
    EXPECT_EQ(AVGPOOL_SINGLE_HEADER, 1);
    EXPECT_EQ(AVGPOOL_VERSION,
              AVGPOOL_VERSION_MAJOR * 10000 + AVGPOOL_VERSION_MINOR * 100 + AVGPOOL_VERSION_PATCH);
}
